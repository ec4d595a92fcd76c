package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/testfiles"
)

// Process tests of the lock around sandbox use (exec and tool call
// -sandbox against a running apply) and of a sandbox that fails under a
// run, on the process harness's 24-step pipeline.

// checkLocked checks that a command refused by the apply p's lock said
// so, naming the holder.
func checkLocked(t *testing.T, what string, p *proc, stdout, stderr string, code int) {
	t.Helper()
	if code != 1 {
		t.Fatalf("%s during apply: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", what, code, stdout, stderr)
	}
	for _, want := range []string{"locked by another agentctl", fmt.Sprintf("PID %d", p.cmd.Process.Pid), `"apply"`, "-lock-timeout"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("%s during apply: the lock error does not mention %q:\n%s", what, want, stderr)
		}
	}
	if stdout != "" {
		t.Fatalf("%s during apply printed output although it was refused:\n%s", what, stdout)
	}
}

// TestExecAndToolCallWaitForApply: while an apply runs the pipeline,
// exec and tool call -sandbox are refused at once with the lock message
// (they would start, use and stop the sandbox the run is using); with
// -lock-timeout exec waits and runs after the apply. plan, which refreshes
// the sandboxes, is refused too. Commands that only read the state, and
// tool call -dir, do not need the lock. The run is untouched: every step
// succeeds once and it completes.
func TestExecAndToolCallWaitForApply(t *testing.T) {
	h := newHarness(t)
	p, hold := h.startHeld(t)

	out, errOut, code := h.run("exec", "sandbox.box", "--", "sh", "-c", "echo ran >> log.txt")
	checkLocked(t, "exec", p, out, errOut, code)
	out, errOut, code = h.run("tool", "call", "exec_command", "-sandbox", "sandbox.box", "-args", `{"cmd": "echo ran >> log.txt"}`)
	checkLocked(t, "tool call -sandbox", p, out, errOut, code)
	out, errOut, code = h.run("plan", "-no-color")
	checkLocked(t, "plan", p, out, errOut, code)
	// -lock=false is honoured (at the user's risk; a local sandbox the
	// state records as running is neither started nor stopped by it).
	if out := h.mustRun("exec", "-lock=false", "sandbox.box", "--", "cat", "README"); out != "a 24-step job\n" {
		t.Fatalf("exec -lock=false during apply: %q", out)
	}

	// Reading the state and using a host directory need no lock.
	if out := h.mustRun("state", "list"); !strings.Contains(out, "sandbox.box") {
		t.Fatalf("state list during apply:\n%s", out)
	}
	if out := h.mustRun("show", "-no-color"); !strings.Contains(out, "run.job") {
		t.Fatalf("show during apply:\n%s", out)
	}
	hostDir := t.TempDir()
	if out := h.mustRun("tool", "call", "exec_command", "-dir", hostDir, "-args", `{"cmd": "echo host"}`); !strings.Contains(out, "host") {
		t.Fatalf("tool call -dir during apply:\n%s", out)
	}

	// With -lock-timeout, exec waits until the apply is done. Debug logs
	// say when it has reached the lock, which the apply holds until the
	// held step is released.
	waiter := h.startEnv([]string{"AGENTCTL_LOG=debug"}, "exec", "-lock-timeout=5m", "sandbox.box", "--", "cat", "log.txt")
	h.waitUntil("exec to wait for the lock", func() bool { return strings.Contains(waiter.out.String(), "taking the state lock") })
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, p.out)
	}
	if code := waiter.wait(t); code != 0 {
		t.Fatalf("waiting exec: exit %d\n%s", code, waiter.out)
	}
	// It ran after the run had finished: it saw all 24 steps.
	if got := waiter.out.String(); !strings.Contains(got, fmt.Sprintf("step %d\n", pipelineSteps)) {
		t.Fatalf("the waiting exec ran before the apply finished:\n%s", got)
	}
	st := h.readState()
	if r := st.Runs["run.job"]; r == nil || r.Status != "completed" {
		t.Fatalf("run.job after the apply: %+v", r)
	}
	if got := h.steps(); len(got) != pipelineSteps {
		t.Fatalf("steps: %v, want each of the %d steps once (nothing else wrote to log.txt)", got, pipelineSteps)
	}
	// The exec left the sandbox as the apply's on_exit did: stopped.
	if s := h.readState().Sandboxes["sandbox.box"]; s.Status != "stopped" {
		t.Fatalf("sandbox.box after the exec: %s, want stopped", s.Status)
	}
	h.checkFinished()
}

// TestSandboxInitKilledDuringRun: the local sandbox's init (and with it
// the command of step 12) is killed from outside during the run. The run
// is not completed: it fails naming the sandbox, without recording step
// 12, plan proposes to resume it, and the next apply runs step 12 again
// and completes it.
func TestSandboxInitKilledDuringRun(t *testing.T) {
	h := newHarness(t)
	p, hold := h.startHeld(t)
	inits := childInits(p.cmd.Process.Pid)
	if len(inits) != 1 {
		t.Fatalf("sandbox inits of the apply: %v, want one (is isolation namespaces?)", inits)
	}
	if err := syscall.Kill(inits[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 1 {
		t.Fatalf("apply whose sandbox died: exit %d, want 1\n%s", code, p.out)
	}
	t.Logf("apply whose sandbox died:\n%s", p.out)
	if !strings.Contains(p.out.String(), "sandbox.box failed during the run: exec_command") || !strings.Contains(p.out.String(), "init process died") {
		t.Fatalf("the apply does not say the sandbox failed under the run:\n%s", p.out)
	}
	st := h.readState()
	r := st.Runs["run.job"]
	if r == nil || r.Status != "failed" || !strings.Contains(r.Error, "sandbox.box failed during the run") {
		t.Fatalf("run.job after its sandbox died: %+v", r)
	}
	if n := countKind(h.journal(), agentloop.StepTool); n != holdStep-1 {
		t.Fatalf("journal holds %d tool results, want %d: the call in flight is not recorded", n, holdStep-1)
	}
	out, errOut, code := h.run("plan", "-no-color", "-detailed-exitcode")
	if code != 2 || !strings.Contains(out, "# run.job will be resumed") || !strings.Contains(out, fmt.Sprintf("failed at turn %d: sandbox.box failed during the run", holdStep)) {
		t.Fatalf("plan after the sandbox died: exit %d\n%s%s", code, out, errOut)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	h.checkFinished()
	if n := h.stepRuns(holdStep); n != 2 {
		t.Fatalf("step 12 ran %d times, want 2 (killed with the sandbox, then on resume): %v", n, h.steps())
	}
}

// TestSandboxDeletedDuringRun: the local sandbox's directory is removed
// from outside during the run. The step in flight ends (its hold file is
// gone with the workspace), and the next one finds no sandbox: the run is
// not completed, plan recreates the sandbox and resumes the run, and the
// next apply completes it (what the steps before the deletion wrote went
// with the workspace: the run had no snapshot yet).
func TestSandboxDeletedDuringRun(t *testing.T) {
	h := newHarness(t)
	p, _ := h.startHeld(t)
	sbDir := filepath.Dir(h.workspace())
	if err := os.RemoveAll(sbDir); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 1 {
		t.Fatalf("apply whose sandbox was deleted: exit %d, want 1\n%s", code, p.out)
	}
	if !strings.Contains(p.out.String(), "sandbox.box was deleted during the run: exec_command") {
		t.Fatalf("the apply does not say the sandbox was deleted under the run:\n%s", p.out)
	}
	st := h.readState()
	if r := st.Runs["run.job"]; r == nil || r.Status != "failed" {
		t.Fatalf("run.job after its sandbox was deleted: %+v", r)
	}
	out, errOut, code := h.run("plan", "-no-color", "-detailed-exitcode")
	if code != 2 || !strings.Contains(out, "# run.job will be resumed") || !strings.Contains(out, "sandbox.box was deleted during the run") || !strings.Contains(out, "# sandbox.box will be created") {
		t.Fatalf("plan after the sandbox was deleted: exit %d\n%s%s", code, out, errOut)
	}
	h.mustRun("apply", "-auto-approve", "-no-color")
	st = h.readState()
	if r := st.Runs["run.job"]; r.Status != "completed" || r.Turns != pipelineSteps+1 {
		t.Fatalf("run.job after the resume: status %s, %d turns", r.Status, r.Turns)
	}
	if got := strings.TrimSpace(h.mustRun("output", "-raw", "answer")); got != finalAnswer {
		t.Fatalf("output answer = %q, want %q", got, finalAnswer)
	}
	if got := h.steps(); len(got) == 0 || got[len(got)-1] != pipelineSteps {
		t.Fatalf("steps after the resume: %v", got)
	}
}

// startEnv is start with extra environment variables.
func (h *harness) startEnv(env []string, args ...string) *proc {
	h.t.Helper()
	cmd := h.command(args...)
	cmd.Env = append(cmd.Env, env...)
	out := &testfiles.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: out, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	h.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		p.done <- nil
	})
	return p
}

// childInits lists the namespaced sandbox inits started by process pid.
func childInits(pid int) []int {
	var pids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			cmdline, _ := os.ReadFile("/proc/" + c + "/cmdline")
			if n, err := strconv.Atoi(c); err == nil && bytes.HasPrefix(cmdline, []byte("agentctl-sandbox-init")) {
				pids = append(pids, n)
			}
		}
	}
	return pids
}
