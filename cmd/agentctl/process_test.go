package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

// Process-level tests: agentctl runs as a real child process (this test
// binary under the name "agentctl", which testscript.Main in main_test.go
// turns into the command), so it can be killed with SIGKILL, interrupted
// with SIGINT and raced against a second agentctl for the lock.
//
// The pipeline is one run of 25 model turns: 24 exec_command calls, each
// appending "step N" to log.txt in the sandbox workspace, then a final
// answer. Step 12 waits while a file named "hold" exists in the workspace,
// which the test creates from the host (the local provider's workspace is
// a host directory) to catch agentctl in the middle of a tool. Nothing
// here measures time: every wait polls a condition with a generous limit.

const (
	pipelineSteps = 24
	holdStep      = 12
	finalAnswer   = "all 24 steps done"
	waitLimit     = 3 * time.Minute
)

func pipelineConfig() string {
	var b strings.Builder
	b.WriteString(`provider "scripted" {
  script "worker" {
`)
	for i := 1; i <= pipelineSteps; i++ {
		cmd := fmt.Sprintf("echo 'step %d' >> log.txt", i)
		if i == holdStep {
			cmd += "; while [ -e hold ]; do sleep 0.05; done"
		}
		fmt.Fprintf(&b, "    reply {\n      call \"exec_command\" {\n        arguments = { cmd = %q }\n      }\n    }\n", cmd)
	}
	fmt.Fprintf(&b, "    reply { text = %q }\n  }\n}\n", finalAnswer)
	b.WriteString(`
provider "local" {}

manifest "ws" {
  file "README" { content = "a 24-step job\n" }
}

sandbox "box" {
  provider = provider.local
  manifest = manifest.ws
}

capability "shell" "default" {
  timeout = "600s"
}

agent "worker" {
  provider     = provider.scripted
  instructions = "Run the steps."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
  max_turns    = 30
}

run "job" {
  agent = agent.worker
  input = "Run all the steps."
}

output "answer" { value = run.job.output }
`)
	return b.String()
}

// harness is one configuration directory and the agentctl binary.
type harness struct {
	t   *testing.T
	bin string
	dir string
	// env is added to every command's environment; keys read the
	// state when it is encrypted (encrypt).
	env  []string
	keys *seal.Keys
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	if testing.Short() {
		t.Skip("process tests run whole pipelines; skipped with -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bindir := t.TempDir()
	bin := filepath.Join(bindir, "agentctl")
	if err := os.Symlink(exe, bin); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(pipelineConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, bin: bin, dir: dir}
	t.Cleanup(func() {
		// Leave no sandbox processes behind whatever happened.
		cmd := h.command("destroy", "-auto-approve", "-no-color", "-lock-timeout=30s")
		_ = cmd.Run()
	})
	return h
}

func (h *harness) command(args ...string) *exec.Cmd {
	cmd := exec.Command(h.bin, args...)
	cmd.Dir = h.dir
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), h.env...)
	return cmd
}

// run runs agentctl to completion and returns its output and exit code.
func (h *harness) run(args ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	cmd := h.command(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		h.t.Fatalf("agentctl %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// mustRun runs agentctl and fails the test unless it exits 0.
func (h *harness) mustRun(args ...string) string {
	h.t.Helper()
	out, errOut, code := h.run(args...)
	if code != 0 {
		h.t.Fatalf("agentctl %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
	}
	return out
}

// proc is an agentctl running in the background.
type proc struct {
	cmd  *exec.Cmd
	out  *testfiles.SyncBuffer
	done chan error
}

// startHeld starts an apply and holds it inside step 12's command: it
// creates the "hold" file in the workspace and waits until the step runs.
// Removing the returned path lets the step finish.
func (h *harness) startHeld(t *testing.T) (*proc, string) {
	t.Helper()
	p := h.start("apply", "-auto-approve", "-no-color")
	h.waitUntil("the workspace", func() bool { return h.workspace() != "" })
	hold := filepath.Join(h.workspace(), "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitUntil("step 12 to start", func() bool { return h.lastStep() == holdStep })
	return p, hold
}

func (h *harness) start(args ...string) *proc {
	h.t.Helper()
	return h.startOn(nil, nil, args...)
}

// startOn starts agentctl with stdin (a terminal, say; nil for none) and
// env added to its environment.
func (h *harness) startOn(stdin *os.File, env []string, args ...string) *proc {
	h.t.Helper()
	cmd := h.command(args...)
	cmd.Env = append(cmd.Env, env...)
	out := &testfiles.SyncBuffer{}
	if stdin != nil {
		cmd.Stdin = stdin
	}
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

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return -int(ws.Signal())
			}
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(waitLimit):
		t.Fatalf("agentctl did not exit; output so far:\n%s", p.out)
	}
	return 0
}

// kill sends SIGKILL and waits for the process to die.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)
}

// waitUntil polls cond until it holds.
func (h *harness) waitUntil(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) stateDir() string { return filepath.Join(h.dir, ".agentctl") }

// readState reads state.json without agentctl (nil when there is none).
func (h *harness) readState() *state.State {
	h.t.Helper()
	d, err := local.OpenDir(h.stateDir(), local.WithEncryption(h.keys))
	if err != nil {
		return nil
	}
	st, err := d.Read(context.Background())
	if err != nil {
		h.t.Fatalf("reading the state: %v", err)
	}
	return st
}

// workspace is the host directory of the sandbox's workspace ("" before
// the sandbox exists).
func (h *harness) workspace() string {
	st := h.readState()
	if st == nil || st.Sandboxes["sandbox.box"] == nil {
		return ""
	}
	ws := filepath.Join(st.Sandboxes["sandbox.box"].Session.ID, "workspace")
	if _, err := os.Stat(ws); err != nil {
		return ""
	}
	return ws
}

// steps returns the step numbers in log.txt, in order.
// stepRuns counts how many times step n ran (its lines in log.txt).
func (h *harness) stepRuns(n int) int {
	c := 0
	for _, s := range h.steps() {
		if s == n {
			c++
		}
	}
	return c
}

func (h *harness) steps() []int {
	ws := h.workspace()
	if ws == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(ws, "log.txt"))
	if err != nil {
		return nil
	}
	var out []int
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(line, "step "))
		if err != nil {
			// A line cut by the kill would be a bug in the test, not in agentctl.
			h.t.Fatalf("log.txt line %q", line)
		}
		out = append(out, n)
	}
	return out
}

// lastStep is the last step number in log.txt (0 when none).
func (h *harness) lastStep() int {
	s := h.steps()
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// journal returns the checkpointed steps of run.job (nil before it starts).
func (h *harness) journal() []agentloop.Step {
	st := h.readState()
	if st == nil || st.Runs["run.job"] == nil || st.Runs["run.job"].Journal == "" {
		return nil
	}
	var steps []agentloop.Step
	d, err := local.OpenDir(h.stateDir(), local.WithEncryption(h.keys))
	if err != nil {
		h.t.Fatal(err)
	}
	_, err = d.ReadJournal(context.Background(), st.Runs["run.job"].Journal, func(raw json.RawMessage) error {
		var s agentloop.Step
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		steps = append(steps, s)
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		h.t.Fatalf("reading the journal: %v", err)
	}
	return steps
}

func countKind(steps []agentloop.Step, k agentloop.StepKind) int {
	n := 0
	for _, s := range steps {
		if s.Kind == k {
			n++
		}
	}
	return n
}

// checkAfterCrash is what must hold after agentctl died mid-apply: the
// state reads, and plan proposes to resume the run (when it had started).
func (h *harness) checkAfterCrash(wantResume bool) {
	h.t.Helper()
	h.mustRun("state", "list")
	out, errOut, code := h.run("plan", "-no-color", "-detailed-exitcode")
	finished := false
	if st := h.readState(); st != nil && st.Runs["run.job"] != nil && st.Runs["run.job"].Status == "completed" {
		// Killed after the run completed (while stopping the sandbox).
		finished = !wantResume
	}
	if code != 2 && !(finished && code == 0) {
		h.t.Fatalf("plan after the crash: exit %d, want 2\n%s%s", code, out, errOut)
	}
	if wantResume {
		st := h.readState()
		if r := st.Runs["run.job"]; r == nil || r.Status != "running" {
			h.t.Fatalf("run.job after kill -9: %+v, want status running", r)
		}
		if !strings.Contains(out, "# run.job will be resumed") || !strings.Contains(out, "(interrupted at turn ") {
			h.t.Fatalf("plan after the crash does not resume run.job:\n%s", out)
		}
	}
}

// checkFinished applies to completion and checks the invariants: every
// step ran at least once and at most twice, in order; the output is the
// uninterrupted run's; the run took its 25 turns.
func (h *harness) checkFinished() {
	h.t.Helper()
	h.mustRun("apply", "-auto-approve", "-no-color")
	steps := h.steps()
	want := 1
	for i, n := range steps {
		switch {
		case n == want:
			want++
		case n == want-1 && (i < 2 || steps[i-2] != n):
			// One repeat of the step in flight when agentctl died.
		default:
			h.t.Fatalf("log.txt steps out of order or run more than twice at line %d: %v", i+1, steps)
		}
	}
	if want != pipelineSteps+1 {
		h.t.Fatalf("log.txt ends at step %d, want %d: %v", want-1, pipelineSteps, steps)
	}
	if got := strings.TrimSpace(h.mustRun("output", "-raw", "answer")); got != finalAnswer {
		h.t.Fatalf("output answer = %q, want %q", got, finalAnswer)
	}
	st := h.readState()
	if r := st.Runs["run.job"]; r.Status != "completed" || r.Turns != pipelineSteps+1 {
		h.t.Fatalf("run.job: status %s, %d turns; want completed, %d turns", r.Status, r.Turns, pipelineSteps+1)
	}
	if n := countKind(h.journal(), agentloop.StepTool); n != pipelineSteps {
		h.t.Fatalf("journal holds %d tool results, want %d", n, pipelineSteps)
	}
	out, errOut, code := h.run("plan", "-no-color", "-detailed-exitcode")
	if code != 0 {
		h.t.Fatalf("plan after the finished apply: exit %d\n%s%s", code, out, errOut)
	}
}

// TestUninterrupted is the reference: the pipeline applied in one go.
func TestUninterrupted(t *testing.T) {
	h := newHarness(t)
	h.checkFinished()
	if got := h.steps(); len(got) != pipelineSteps {
		t.Fatalf("uninterrupted run logged %v", got)
	}
}

// TestCrashBetweenSteps kills agentctl as soon as a step's command has
// written its line: agentctl is then between that tool finishing, its
// result being checkpointed, and the next model turn.
func TestCrashBetweenSteps(t *testing.T) {
	h := newHarness(t)
	for _, at := range []int{3, 17} {
		p := h.start("apply", "-auto-approve", "-no-color")
		h.waitUntil(fmt.Sprintf("step %d in log.txt", at), func() bool { return h.lastStep() >= at })
		p.kill(t)
		h.checkAfterCrash(true)
	}
	h.checkFinished()
}

// TestCrashDuringTool kills agentctl while step 12's command runs: the
// tool call has no recorded result, so resume executes it again
// (at-least-once), and the log shows step 12 twice.
func TestCrashDuringTool(t *testing.T) {
	h := newHarness(t)
	p, hold := h.startHeld(t)
	p.kill(t)
	if n := countKind(h.journal(), agentloop.StepTool); n != holdStep-1 {
		t.Fatalf("journal holds %d tool results after a kill during step %d, want %d", n, holdStep, holdStep-1)
	}
	h.checkAfterCrash(true)
	out, _, _ := h.run("plan", "-no-color")
	if !strings.Contains(out, fmt.Sprintf("(interrupted at turn %d)", holdStep)) {
		t.Fatalf("plan does not say where the run stopped:\n%s", out)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	h.checkFinished()
	if n := h.stepRuns(holdStep); n != 2 {
		t.Fatalf("step 12 ran %d times, want 2 (once killed, once on resume): %v", n, h.steps())
	}
}

// TestCrashDuringModelCall kills agentctl right after the journal shows a
// tool result. With the scripted model a model call takes no time, so
// "during a model call" is this window: the tool result is checkpointed
// and the next model turn is being requested or recorded. Resume must
// not run that tool again.
func TestCrashDuringModelCall(t *testing.T) {
	h := newHarness(t)
	for _, at := range []int{5, 20} {
		p := h.start("apply", "-auto-approve", "-no-color")
		h.waitUntil(fmt.Sprintf("tool result %d in the journal", at), func() bool { return countKind(h.journal(), agentloop.StepTool) >= at })
		p.kill(t)
		h.checkAfterCrash(true)
	}
	h.checkFinished()
}

// TestCrashAnywhere kills agentctl after growing delays from its start,
// so kills land in every phase: loading, locking, sandbox creation, state
// writes, journal appends, tools and model turns. After each, the state
// must read and plan must work; at the end apply finishes as if nothing
// happened.
func TestCrashAnywhere(t *testing.T) {
	h := newHarness(t)
	for i, delay := range []time.Duration{0, 2, 5, 10, 20, 40, 80, 120, 160, 240, 320, 400, 500, 600, 800, 1000} {
		p := h.start("apply", "-auto-approve", "-no-color")
		time.Sleep(delay * time.Millisecond)
		p.kill(t)
		h.checkAfterCrash(false)
		st := h.readState()
		r := st.Runs["run.job"]
		if r == nil {
			t.Logf("attempt %d: killed after %v, before the run started (%d sandboxes in state)", i, delay*time.Millisecond, len(st.Sandboxes))
		} else {
			t.Logf("attempt %d: killed after %v, run %s with %d journal steps", i, delay*time.Millisecond, r.Status, len(h.journal()))
		}
		if r != nil && r.Status == "completed" {
			t.Logf("attempt %d: the run completed before the kill", i)
			break
		}
	}
	h.checkFinished()
}

// TestInterrupt sends SIGINT while step 12's command runs: agentctl
// finishes the step, checkpoints it, marks the run interrupted, releases
// the lock and exits non-zero; the next apply resumes without running
// step 12 again.
func TestInterrupt(t *testing.T) {
	h := newHarness(t)
	p, hold := h.startHeld(t)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// The step in flight finishes only when the hold is lifted; agentctl
	// must still be waiting for it, not gone.
	h.waitUntil("agentctl to acknowledge the interrupt", func() bool { return strings.Contains(p.out.String(), "Interrupt received") })
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code <= 0 {
		t.Fatalf("apply after SIGINT exited %d, want a non-zero exit code\n%s", code, p.out)
	}
	t.Logf("apply interrupted by SIGINT:\n%s", p.out)
	st := h.readState()
	if r := st.Runs["run.job"]; r.Status != "interrupted" {
		t.Fatalf("run.job status %q after SIGINT, want interrupted", r.Status)
	}
	if n := countKind(h.journal(), agentloop.StepTool); n != holdStep {
		t.Fatalf("journal holds %d tool results, want %d (the step in flight is checkpointed)", n, holdStep)
	}
	if s := h.steps(); s[len(s)-1] != holdStep {
		t.Fatalf("steps after SIGINT: %v; no step may start after the one in flight", s)
	}
	// The lock was released: plan takes it at once.
	out := h.mustRun("plan", "-no-color")
	if !strings.Contains(out, "# run.job will be resumed") {
		t.Fatalf("plan after SIGINT:\n%s", out)
	}
	h.checkFinished()
	if got := h.steps(); len(got) != pipelineSteps {
		t.Fatalf("after an interrupt no step runs twice: %v", got)
	}
}

// TestLock: a second apply while the first holds the lock fails at once
// naming the holder; with -lock-timeout it waits and then succeeds. A lock
// left by a killed agentctl is released by the kernel, and force-unlock
// removes the lock information the dead process left.
func TestLock(t *testing.T) {
	h := newHarness(t)
	p, hold := h.startHeld(t)

	_, errOut, code := h.run("apply", "-auto-approve", "-no-color")
	if code != 1 {
		t.Fatalf("second apply: exit %d, want 1\n%s", code, errOut)
	}
	for _, want := range []string{"locked", fmt.Sprintf("PID %d", p.cmd.Process.Pid), `"apply"`, "-lock-timeout"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("the lock error does not mention %q:\n%s", want, errOut)
		}
	}

	// -lock-timeout waits for the first apply to finish.
	waiter := h.start("apply", "-auto-approve", "-no-color", "-lock-timeout=5m")
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("first apply: exit %d\n%s", code, p.out)
	}
	if code := waiter.wait(t); code != 0 {
		t.Fatalf("waiting apply: exit %d\n%s", code, waiter.out)
	}
	if !strings.Contains(waiter.out.String(), "No changes.") {
		t.Fatalf("the waiting apply should find nothing to do:\n%s", waiter.out)
	}

	// A killed holder: the kernel releases the lock, its info stays behind
	// until force-unlock (or the next lock) removes it.
	h.mustRun("apply", "-auto-approve", "-no-color", "-replace=run.job")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p = h.start("apply", "-auto-approve", "-no-color", "-replace=run.job")
	h.waitUntil("step 12 to start again", func() bool { return h.lastStep() == holdStep })
	p.kill(t)
	infoPath := filepath.Join(h.stateDir(), local.LockInfoFileName)
	b, err := os.ReadFile(infoPath)
	if err != nil {
		t.Fatalf("lock info after kill -9: %v", err)
	}
	var info state.LockInfo
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if _, _, code := h.run("force-unlock", "wrong-id"); code == 0 {
		t.Fatal("force-unlock with a wrong ID succeeded")
	}
	out := h.mustRun("force-unlock", info.ID)
	if !strings.Contains(out, "successfully unlocked") {
		t.Fatalf("force-unlock: %s", out)
	}
	if _, err := os.Stat(infoPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock info still there after force-unlock: %v", err)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	h.mustRun("apply", "-auto-approve", "-no-color")

	// The lock error's advice works when a later command took the lock
	// first: kill a holder, let plan take and release the lock (clearing
	// the info the dead one left), then force-unlock its ID.
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p = h.start("apply", "-auto-approve", "-no-color", "-replace=run.job")
	h.waitUntil("step 12 to start again", func() bool { return h.lastStep() == holdStep })
	if b, err = os.ReadFile(infoPath); err != nil || json.Unmarshal(b, &info) != nil {
		t.Fatalf("lock info of the running apply: %v", err)
	}
	p.kill(t)
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	h.run("plan", "-no-color")
	out = h.mustRun("force-unlock", info.ID)
	if !strings.Contains(out, "was already released") {
		t.Fatalf("force-unlock after plan cleared the lock: %s", out)
	}
}
