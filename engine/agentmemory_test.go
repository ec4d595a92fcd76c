package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/internal/fakeopenai"
)

const (
	phaseOneMark = "You read the record of one completed run"
	phaseTwoMark = "You maintain the long-term memory"
)

// memoryConfig is two runs of an analyst with memory, on the OpenAI fake.
func memoryConfig(url string, batch int) string {
	return fmt.Sprintf(`
provider "openai" {
  base_url    = %q
  max_retries = 0
}
provider "local" { isolation = "none" }
sandbox "s" {
  provider = provider.local
}
capability "shell" "default" {}
capability "filesystem" "default" {}
capability "memory" "default" {
  read {}
  write {
    batch_size   = %d
    extra_prompt = "Note the units."
  }
}
agent "analyst" {
  model        = "gpt-test"
  sandbox      = sandbox.s
  capabilities = [capability.shell.default, capability.filesystem.default, capability.memory.default]
}
run "first" {
  agent = agent.analyst
  input = "Which column holds revenue?"
}
run "second" {
  agent      = agent.analyst
  input      = "What is the total?"
  depends_on = [run.first]
}
`, url, batch)
}

// memoryFake answers the analyst's turns and the memory phases, and
// records what each kind of request carried.
type memoryFake struct {
	mu              sync.Mutex
	phase1, phase2  []fakeopenai.Request
	firstOfSecond   string // instructions of run.second's first request
	failPhase1Times int
}

func (m *memoryFake) handle(r fakeopenai.Request) fakeopenai.Reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	instr, _ := r.JSON["instructions"].(string)
	input := fmt.Sprint(r.JSON["input"])
	switch {
	case strings.Contains(instr, phaseOneMark):
		m.phase1 = append(m.phase1, r)
		if m.failPhase1Times > 0 {
			m.failPhase1Times--
			return fakeopenai.Reply{Fault: fakeopenai.Fault{Kind: fakeopenai.FaultStatus, Status: 400, Message: "injected"}}
		}
		r := fakeopenai.JSON(map[string]string{"rollout_slug": "Revenue Column", "rollout_summary": "found it", "raw_memory": fmt.Sprintf("- memory %d: revenue is column 2", len(m.phase1))})
		r.Usage = fakeopenai.Usage{InputTokens: 50, OutputTokens: 10}
		return r
	case strings.Contains(instr, phaseTwoMark):
		m.phase2 = append(m.phase2, r)
		r := fakeopenai.JSON(map[string]string{"memory_md": "# Data\n- revenue is column 2\n", "memory_summary": fmt.Sprintf("Revenue lives in column 2 (consolidation %d).", len(m.phase2))})
		r.Usage = fakeopenai.Usage{InputTokens: 70, OutputTokens: 20}
		return r
	case strings.Contains(input, "What is the total?"):
		if !strings.Contains(input, "function_call") {
			m.firstOfSecond = instr
		}
		return fakeopenai.Text("1000")
	}
	if !strings.Contains(input, "function_call") {
		return fakeopenai.Calls(fakeopenai.FunctionCall("c1", "exec_command", `{"cmd":"echo quarter,revenue"}`))
	}
	return fakeopenai.Text("column 2")
}

func TestMemoryEndToEnd(t *testing.T) {
	mf := &memoryFake{}
	srv := fakeopenai.New(t, fakeopenai.WithHandler(mf.handle))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(memoryConfig(srv.URL, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	e := reloadDir(t, dir)
	st := planApply(t, e, PlanOptions{})
	for _, r := range srv.Requests() {
		if r.Invalid != nil {
			t.Fatalf("request %d invalid: %v", r.Seq, r.Invalid)
		}
	}
	if len(mf.phase1) != 2 || len(mf.phase2) != 2 {
		t.Fatalf("%d phase-1 and %d phase-2 requests, want 2 and 2", len(mf.phase1), len(mf.phase2))
	}
	// Phase 1 reads the rollout (no instructions in it), with the extra prompt.
	in := fmt.Sprint(mf.phase1[0].JSON["input"])
	if !strings.Contains(in, `"type":"function_call"`) || !strings.Contains(in, "Which column holds revenue?") || strings.Contains(in, "## Memory") {
		t.Errorf("phase 1 input: %s", in)
	}
	if instr, _ := mf.phase1[0].JSON["instructions"].(string); !strings.Contains(instr, "Note the units.") {
		t.Errorf("phase 1 lacks the extra prompt: %s", instr)
	}
	// The second run's instructions carry the summary the first wrote.
	if !strings.Contains(mf.firstOfSecond, "Revenue lives in column 2 (consolidation 1).") || !strings.Contains(mf.firstOfSecond, "grep -n -i") {
		t.Errorf("run.second's instructions lack the memory summary:\n%s", mf.firstOfSecond)
	}
	ws := filepath.Join(dir, ".agentctl")
	for _, rel := range []string{"memory/MEMORY.md", "memory/memory_summary.md", "memory/raw_memories.md"} {
		if _, err := workspaceFile(ws, rel); err != nil {
			t.Errorf("%v", err)
		}
	}
	rollouts, _ := filepath.Glob(filepath.Join(dir, ".agentctl/sandboxes/*/workspace/rollouts/*.jsonl"))
	summaries, _ := filepath.Glob(filepath.Join(dir, ".agentctl/sandboxes/*/workspace/memory/rollout_summaries/*_revenue-column.md"))
	if len(rollouts) != 2 || len(summaries) != 2 {
		t.Errorf("rollouts %v, summaries %v", rollouts, summaries)
	}
	m := st.Memories["capability.memory.default@sandbox.s"]
	if m == nil || m.Pending() || m.Calls != 4 || m.Extracted != 2 || m.Consolidations != 2 || m.Usage.InputTokens == 0 {
		t.Fatalf("memory record %+v", m)
	}
	if st.Runs["run.first"].MemoryUsage.InputTokens == 0 {
		t.Error("the run's memory usage is not recorded")
	}
	// Nothing changed: no model call at all, memory included.
	before := len(srv.Requests())
	planApply(t, reloadDir(t, dir), PlanOptions{})
	if n := len(srv.Requests()) - before; n != 0 {
		t.Fatalf("an unchanged re-apply made %d model calls", n)
	}
}

// TestMemoryConsolidatesAtTheEndOfApply: with a batch larger than the
// runs, phase 2 runs once, at the end of the apply.
func TestMemoryConsolidatesAtTheEndOfApply(t *testing.T) {
	mf := &memoryFake{}
	srv := fakeopenai.New(t, fakeopenai.WithHandler(mf.handle))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(memoryConfig(srv.URL, 5)), 0o644)
	planApply(t, reloadDir(t, dir), PlanOptions{})
	if len(mf.phase1) != 2 || len(mf.phase2) != 1 {
		t.Fatalf("%d phase-1 and %d phase-2 requests, want 2 and 1", len(mf.phase1), len(mf.phase2))
	}
	if in := fmt.Sprint(mf.phase2[0].JSON["input"]); !strings.Contains(in, "memory 1") || !strings.Contains(in, "memory 2") {
		t.Errorf("the consolidation lacks a raw memory: %s", in)
	}
	if strings.Contains(mf.firstOfSecond, "<memory_summary>") {
		t.Error("run.second saw a summary before any consolidation")
	}
}

// TestMemoryFailureIsCarriedOn: a failed phase 1 leaves the run completed
// and the rollout queued; plan shows the waiting work and the next apply
// does it, without losing the rollout.
func TestMemoryFailureIsCarriedOn(t *testing.T) {
	// Phase 1 fails after each run and again at the end of the apply.
	mf := &memoryFake{failPhase1Times: 3}
	srv := fakeopenai.New(t, fakeopenai.WithHandler(mf.handle))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(memoryConfig(srv.URL, 1)), 0o644)
	e := reloadDir(t, dir)
	st, _ := e.State.Read(context.Background())
	p, err := e.Plan(t.Context(), st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Apply(t.Context(), st, p)
	if err == nil || !strings.Contains(err.Error(), "run.first completed, but its memory was not written") {
		t.Fatalf("apply with a failing phase 1: %v", err)
	}
	if st.Runs["run.first"].Status != RunCompleted {
		t.Fatalf("run.first is %s", st.Runs["run.first"].Status)
	}
	e = reloadDir(t, dir)
	st, _ = e.State.Read(context.Background())
	p, err = e.Plan(t.Context(), st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Memory) != 1 || !strings.Contains(p.Memory[0].Reason, "2 rollouts to extract (phase 1)") {
		t.Fatalf("plan's memory work %+v", p.Memory)
	}
	if err := e.Apply(t.Context(), st, p); err != nil {
		t.Fatal(err)
	}
	if m := st.Memories["capability.memory.default@sandbox.s"]; m.Pending() || m.Extracted != 2 || m.Consolidations != 1 {
		t.Fatalf("memory after the second apply %+v", m)
	}
}

// BenchmarkReapplyUnchangedWithMemory re-applies a pipeline whose agent
// has memory, unchanged: it reports the model calls each re-apply makes
// (memory phases included), which must be 0.
//
//	go test ./engine -run '^$' -bench ReapplyUnchangedWithMemory
func BenchmarkReapplyUnchangedWithMemory(b *testing.B) {
	mf := &memoryFake{}
	srv := fakeopenai.New(b, fakeopenai.WithHandler(mf.handle))
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(memoryConfig(srv.URL, 1)), 0o644)
	planApply(b, reloadDir(b, dir), PlanOptions{})
	before := len(srv.Requests())
	n := 0
	for b.Loop() {
		planApply(b, reloadDir(b, dir), PlanOptions{})
		n++
	}
	calls := len(srv.Requests()) - before
	b.ReportMetric(float64(calls)/float64(n), "model-calls/op")
	if calls != 0 {
		b.Fatalf("unchanged re-applies made %d model calls", calls)
	}
}
