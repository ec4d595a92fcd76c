package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/fakeopenai"
)

const memoryKey = "capability.memory.default@sandbox.box"

func memoryPipeline(url string) string {
	return fmt.Sprintf(`provider "openai" {
  base_url    = %q
  max_retries = 0
}
provider "local" {}
sandbox "box" {
  provider = provider.local
}
capability "shell" "default" {}
capability "filesystem" "default" {}
capability "memory" "default" {
  read {}
  write {}
}
agent "analyst" {
  model        = "gpt-test"
  sandbox      = sandbox.box
  capabilities = [capability.shell.default, capability.filesystem.default, capability.memory.default]
}
run "job" {
  agent = agent.analyst
  input = "Count the lines of README."
}
`, url)
}

// TestMemoryCrashDuringPhases kills agentctl with SIGKILL while its memory
// call of phase 1, then of phase 2, is in flight (the OpenAI fake holds
// it), and applies again: the run is not repeated, the rollout is not
// lost, a phase recorded before the kill is not asked again, and the
// memory ends consolidated.
func TestMemoryCrashDuringPhases(t *testing.T) {
	for _, phase := range []int{1, 2} {
		t.Run(fmt.Sprintf("phase%d", phase), func(t *testing.T) {
			h := newHarness(t)
			var mu sync.Mutex
			calls := map[int]int{}
			held := make(chan struct{})
			var once sync.Once
			srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
				instr, _ := r.JSON["instructions"].(string)
				p := 0
				switch {
				case strings.Contains(instr, "You read the record of one completed run"):
					p = 1
				case strings.Contains(instr, "You maintain the long-term memory"):
					p = 2
				}
				mu.Lock()
				calls[p]++
				n := calls[p]
				mu.Unlock()
				if p == phase && n == 1 {
					once.Do(func() { close(held) })
					return fakeopenai.Reply{Fault: fakeopenai.Fault{Kind: fakeopenai.FaultHang, MaxHang: 10 * time.Minute}}
				}
				switch p {
				case 1:
					return fakeopenai.JSON(map[string]string{"rollout_slug": "count-lines", "rollout_summary": "counted", "raw_memory": "- README has 1 line"})
				case 2:
					return fakeopenai.JSON(map[string]string{"memory_md": "- README has 1 line\n", "memory_summary": "README has one line."})
				}
				if !strings.Contains(fmt.Sprint(r.JSON["input"]), "function_call") {
					return fakeopenai.Calls(fakeopenai.FunctionCall("c1", "exec_command", `{"cmd":"echo hi > README; wc -l README"}`))
				}
				return fakeopenai.Text("1 line")
			}))
			if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(memoryPipeline(srv.URL)), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
			p := h.start("apply", "-auto-approve", "-no-color")
			select {
			case <-held:
			case <-time.After(waitLimit):
				t.Fatalf("phase %d was never asked; output:\n%s", phase, p.out)
			}
			p.kill(t)

			st := h.readState()
			m := st.Memories[memoryKey]
			if m == nil {
				t.Fatalf("no memory record after the kill: %+v", st.Memories)
			}
			queue := m.Phase1
			if phase == 2 {
				queue = m.Phase2
			}
			if len(queue) != 1 {
				t.Fatalf("after a kill in phase %d the memory record is %+v", phase, m)
			}
			rollout := filepath.Join(h.workspace(), "rollouts", queue[0]+".jsonl")
			if _, err := os.Stat(rollout); err != nil {
				t.Fatalf("the rollout is lost: %v", err)
			}
			out, errOut, code := h.run("plan", "-no-color", "-detailed-exitcode")
			if code != 2 || !strings.Contains(out, "run.job will be resumed") {
				t.Fatalf("plan after the kill: exit %d\n%s%s", code, out, errOut)
			}

			p = h.start("apply", "-auto-approve", "-no-color")
			if code := p.wait(t); code != 0 {
				t.Fatalf("apply after the kill: exit %d\n%s", code, p.out)
			}
			mu.Lock()
			defer mu.Unlock()
			if calls[0] != 2 {
				t.Errorf("the run's model calls: %d, want 2 (none repeated)", calls[0])
			}
			want := map[int][2]int{1: {2, 1}, 2: {1, 2}}[phase]
			if calls[1] != want[0] || calls[2] != want[1] {
				t.Errorf("memory calls: phase 1 %d, phase 2 %d; want %d and %d", calls[1], calls[2], want[0], want[1])
			}
			st = h.readState()
			if m := st.Memories[memoryKey]; m.Pending() || m.Extracted != 1 || m.Consolidations != 1 {
				t.Fatalf("memory after the resume: %+v", m)
			}
			if st.Runs["run.job"].Status != "completed" {
				t.Fatalf("run.job is %s", st.Runs["run.job"].Status)
			}
			if b, err := os.ReadFile(filepath.Join(h.workspace(), "memory", "memory_summary.md")); err != nil || !strings.Contains(string(b), "README has one line.") {
				t.Fatalf("memory_summary.md: %q, %v", b, err)
			}
			if _, err := os.Stat(rollout); err != nil {
				t.Fatalf("the rollout is gone after the resume: %v", err)
			}
		})
	}
}
