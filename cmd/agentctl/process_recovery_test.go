package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/state/local"
)

// Recovery tests on a real agentctl child process (the harness of
// process_test.go): Ctrl-C during a model call's retries, a journal lost
// after kill -9, and the state backup.

// interruptLimit bounds how long agentctl may take to exit after the first
// SIGINT while a model call is being retried. The retries configured
// below would take 20 minutes; this is far below that and far above what
// checkpointing and stopping a local sandbox take.
const interruptLimit = 30 * time.Second

func openAIConfig() string {
	return `provider "openai" {
  max_retries = 20
}

provider "local" { isolation = "none" }

manifest "ws" {}

sandbox "box" {
  provider = provider.local
  manifest = manifest.ws
}

capability "shell" "default" {}

agent "worker" {
  model        = "gpt-test"
  instructions = "Run the steps."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}

run "job" {
  agent = agent.worker
  input = "Run the steps."
}

output "answer" { value = run.job.output }
`
}

// functionOutputs counts the tool results a request carries.
func functionOutputs(r fakeopenai.Request) int {
	n := 0
	for _, it := range r.Input() {
		if it["type"] == "function_call_output" || it["role"] == "tool" {
			n++
		}
	}
	return n
}

// TestInterruptDuringModelRetries: the model's third turn fails with 503
// and "Retry-After: 60", 20 retries allowed. The first SIGINT abandons the
// call and its retries at once: agentctl exits 1 promptly, the run is
// interrupted with its two checkpointed turns and tool results, and the
// next apply resumes it (re-issuing the abandoned call, not the tools).
func TestInterruptDuringModelRetries(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var failed atomic.Int32
	srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		switch n := functionOutputs(r); {
		case n < 2:
			cmd := fmt.Sprintf(`{"cmd":"echo step %d >> log.txt"}`, n+1)
			return fakeopenai.Calls(fakeopenai.FunctionCall(fmt.Sprintf("call_%d", n+1), "exec_command", cmd))
		case failing.Load():
			failed.Add(1)
			return fakeopenai.Status(503, "Retry-After", "60")
		}
		return fakeopenai.Text("both steps done")
	}))
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(openAIConfig()), 0o644); err != nil {
		t.Fatal(err)
	}

	p := h.start("apply", "-auto-approve", "-no-color")
	// Wait until the third turn has failed and is being retried.
	h.waitUntil("the third model turn to fail", func() bool { return failed.Load() >= 1 })
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(interruptLimit):
		t.Fatalf("agentctl still running %v after SIGINT: the model call's retries were not abandoned\n%s", interruptLimit, p.out)
	}
	if code := p.wait(t); code != 1 {
		t.Fatalf("apply after SIGINT exited %d, want 1\n%s", code, p.out)
	}
	out := p.out.String()
	t.Logf("apply interrupted during retries:\n%s", out)
	for _, want := range []string{"Interrupt received", "run.job: interrupted at turn 2", "checkpointed", "apply again"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q", want)
		}
	}
	if n := failed.Load(); n > 3 {
		t.Errorf("the failing turn was requested %d times; the retries should stop at the interrupt", n)
	}

	st := h.readState()
	r := st.Runs["run.job"]
	if r == nil || r.Status != "interrupted" {
		t.Fatalf("run.job after SIGINT: %+v, want status interrupted", r)
	}
	// input, model, tool, model, tool: the abandoned call is not a step.
	if r.Steps != 5 || r.Turns != 2 {
		t.Errorf("run.job records %d steps and %d turns, want 5 and 2", r.Steps, r.Turns)
	}
	steps := h.journal()
	if len(steps) != 5 || countKind(steps, agentloop.StepTool) != 2 {
		t.Fatalf("journal holds %d steps (%d tool results), want 5 (2)", len(steps), countKind(steps, agentloop.StepTool))
	}
	plan := h.mustRun("plan", "-no-color")
	if !strings.Contains(plan, "# run.job will be resumed") || !strings.Contains(plan, "(interrupted at turn 2)") {
		t.Fatalf("plan after SIGINT:\n%s", plan)
	}

	failing.Store(false)
	h.mustRun("apply", "-auto-approve", "-no-color")
	if got := strings.TrimSpace(h.mustRun("output", "-raw", "answer")); got != "both steps done" {
		t.Fatalf("output after resume = %q", got)
	}
	log := h.mustRun("exec", "sandbox.box", "--", "cat", "log.txt")
	if log != "step 1\nstep 2\n" {
		t.Fatalf("log.txt after resume:\n%s\nwant each step once", log)
	}
	if r := h.readState().Runs["run.job"]; r.Status != "completed" || r.Turns != 3 || r.Steps != 6 {
		t.Fatalf("run.job after resume: status %s, %d turns, %d steps; want completed, 3, 6", r.Status, r.Turns, r.Steps)
	}
}

// TestJournalLostAfterKill: agentctl is killed during step 12 and the
// run's journal is then deleted. plan, apply and show refuse to resume it,
// naming the run, the journal and the progress lost, and nothing runs
// again; -replace starts it over from turn 0.
func TestJournalLostAfterKill(t *testing.T) {
	h := newHarness(t)
	p, hold := h.startHeld(t)
	p.kill(t)
	st := h.readState()
	r := st.Runs["run.job"]
	if r == nil || r.Status != "running" || r.Journal == "" {
		t.Fatalf("run.job after kill -9: %+v", r)
	}
	journal := filepath.Join(h.stateDir(), r.Journal)
	if err := os.Remove(journal); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	before := h.steps()
	for _, args := range [][]string{
		{"plan", "-no-color"},
		{"apply", "-auto-approve", "-no-color"},
		{"show", "-no-color", "run.job"},
	} {
		out, errOut, code := h.run(args...)
		if code != 1 {
			t.Fatalf("agentctl %v with the journal deleted: exit %d, want 1\n%s%s", args, code, out, errOut)
		}
		for _, want := range []string{"run.job: its journal " + journal + " is missing", "checkpointed progress (every step checkpointed since its last apply started it)", "cannot be resumed", "-replace=run.job"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("agentctl %v: the error lacks %q:\n%s", args, want, errOut)
			}
		}
	}
	if got := h.steps(); len(got) != len(before) {
		t.Fatalf("steps ran with the journal lost: %v, before %v", got, before)
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Fatalf("a journal was created again: %v", err)
	}
	// -replace starts over: every step runs again from step 1.
	h.mustRun("apply", "-auto-approve", "-no-color", "-replace=run.job")
	got := h.steps()
	if len(got) != len(before)+pipelineSteps || got[len(before)] != 1 {
		t.Fatalf("after -replace the log is %v; want the %d steps before the kill, then steps 1 to %d", got, len(before), pipelineSteps)
	}
}

// TestStateBackup: after two applies the backup holds the state file as
// the first apply left it (each apply's changes go to the state log and
// are compacted into the state file when it releases the lock); a
// damaged state.json is reported naming the backup, and copying the
// backup back works.
func TestStateBackup(t *testing.T) {
	h := newHarness(t)
	h.mustRun("apply", "-auto-approve", "-no-color")
	first := h.readState()
	h.mustRun("apply", "-auto-approve", "-no-color", "-replace=run.job")
	stateFile := filepath.Join(h.stateDir(), "state.json")
	backupFile := stateFile + ".backup"
	cur := h.readState()
	bd, err := local.OpenDir(h.stateDir(), local.WithStateFile(backupFile))
	if err != nil {
		t.Fatal(err)
	}
	prev, err := bd.Read(context.Background())
	if err != nil {
		t.Fatalf("the backup does not read as a state: %v", err)
	}
	if prev.Serial != first.Serial || prev.Lineage != cur.Lineage || cur.Serial <= prev.Serial {
		t.Fatalf("backup serial %d lineage %s; state serial %d lineage %s: want the first apply's serial %d, of the same lineage", prev.Serial, prev.Lineage, cur.Serial, cur.Lineage, first.Serial)
	}
	if _, err := os.Stat(stateFile + ".log"); !os.IsNotExist(err) {
		t.Fatalf("the state log outlived the apply that released the lock: %v", err)
	}
	if fi, err := os.Stat(backupFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}

	if err := os.WriteFile(stateFile, []byte(`{"format_version": 1, "serial": 4`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"plan", "-no-color"}, {"state", "list"}} {
		out, errOut, code := h.run(args...)
		if code != 1 {
			t.Fatalf("agentctl %v with a damaged state: exit %d\n%s%s", args, code, out, errOut)
		}
		want := fmt.Sprintf("kept in %s (serial %d)", backupFile, prev.Serial)
		if !strings.Contains(errOut, stateFile) || !strings.Contains(errOut, want) || !strings.Contains(errOut, "cp "+backupFile+" "+stateFile) {
			t.Fatalf("agentctl %v: the error does not name the state file and the backup (%q):\n%s", args, want, errOut)
		}
	}
	b, err := os.ReadFile(backupFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	h.mustRun("state", "list")
	// The backup's state lacks only the latest write (recording the
	// outputs), which the next apply makes again.
	h.mustRun("apply", "-auto-approve", "-no-color")
	out, errOut, code := h.run("plan", "-no-color", "-detailed-exitcode")
	if code != 0 {
		t.Fatalf("plan after restoring the backup and applying: exit %d\n%s%s", code, out, errOut)
	}
	if got := strings.TrimSpace(h.mustRun("output", "-raw", "answer")); got != finalAnswer {
		t.Fatalf("output after restoring the backup: %q", got)
	}
}
