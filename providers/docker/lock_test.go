package docker

// A Docker sandbox shared by an apply and other commands: exec and tool
// call -sandbox coordinate with the apply through the state lock, and a
// container stopped from outside during a run leaves the run failed and
// resumable instead of completed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testfiles"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state/statefile"
)

const (
	raceSteps = 30
	raceHold  = 12
)

// raceHCL is one run of 30 exec_command steps on a docker sandbox, each
// appending "step N" to log.txt; step 12 then waits until the test writes
// a file named "release" into the workspace.
func raceHCL() string {
	var b strings.Builder
	b.WriteString("provider \"scripted\" {\n  script \"worker\" {\n")
	for i := 1; i <= raceSteps; i++ {
		cmd := fmt.Sprintf("echo 'step %d' >> log.txt", i)
		if i == raceHold {
			cmd += "; while [ ! -e release ]; do sleep 0.05; done"
		}
		fmt.Fprintf(&b, "    reply {\n      call \"exec_command\" {\n        arguments = { cmd = %q }\n      }\n    }\n", cmd)
	}
	fmt.Fprintf(&b, "    reply { text = \"all %d steps done\" }\n  }\n}\n", raceSteps)
	b.WriteString(`
provider "docker" {}

manifest "ws" {
  file "README" { content = "a long job\n" }
}

sandbox "box" {
  provider = provider.docker
  image    = "` + TestImage + `"
  manifest = manifest.ws
  on_exit  = "stop"
}

capability "shell" "default" {
  timeout = "600s"
}

agent "worker" {
  provider     = provider.scripted
  instructions = "Run the steps."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
  max_turns    = 40
}

run "job" {
  agent = agent.worker
  input = "Run all the steps."
}
`)
	return b.String()
}

// bg is an agentctl running in the background.
type bg struct {
	cmd  *exec.Cmd
	out  *syncBuf
	done chan error
}

type syncBuf struct {
	mu  chan struct{}
	buf []byte
}

func newSyncBuf() *syncBuf { return &syncBuf{mu: make(chan struct{}, 1)} }

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	s.buf = append(s.buf, p...)
	<-s.mu
	return len(p), nil
}

func (s *syncBuf) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return string(s.buf)
}

func (c *cli) start(env []string, args ...string) *bg {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := c.Command(ctx, args...)
	cmd.Env = append(cmd.Env, env...)
	out := newSyncBuf()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		c.T.Fatal(err)
	}
	b := &bg{cmd: cmd, out: out, done: make(chan error, 1)}
	go func() { b.done <- cmd.Wait(); cancel() }()
	c.T.Cleanup(func() {
		_ = cmd.Process.Kill()
		b.wait(c.T)
	})
	return b
}

// wait returns the exit code once the process has exited.
func (b *bg) wait(t *testing.T) int {
	t.Helper()
	err := <-b.done
	b.done <- err
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("agentctl: %v\n%s", err, b.out)
	return -1
}

// poll waits until cond holds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// box opens the configuration's docker sandbox from the state.
func (c *cli) box(p *Provider) sandbox.Sandbox {
	c.T.Helper()
	ss := c.MustState().Sandboxes["sandbox.box"]
	if ss == nil {
		c.T.Fatal("sandbox.box is not in the state")
	}
	sb, err := p.Open(context.Background(), sandbox.Spec{Address: "sandbox.box", Root: "/workspace"}, ss.Session)
	if err != nil {
		c.T.Fatal(err)
	}
	return sb
}

// logSteps reads the step numbers in the sandbox's log.txt.
func logSteps(t *testing.T, sb sandbox.Sandbox) []int {
	t.Helper()
	b, err := sb.ReadFile(context.Background(), "log.txt", 0)
	if err != nil {
		return nil
	}
	var steps []int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		n, err := strconv.Atoi(strings.TrimPrefix(line, "step "))
		if err != nil {
			t.Fatalf("log.txt line %q", line)
		}
		steps = append(steps, n)
	}
	return steps
}

// startHeldApply pre-creates the (then stopped) sandbox, starts an apply
// of the pipeline and waits until it is inside step 12.
func startHeldApply(t *testing.T, p *Provider) (*cli, *bg, sandbox.Sandbox) {
	t.Helper()
	dir := t.TempDir()
	testfiles.WriteTree(t, dir, map[string]string{"race.hcl": raceHCL()})
	c := newCLI(t, dir, "race.hcl")
	c.destroyOnCleanup(p)
	c.OK("apply", "-auto-approve", "-target=sandbox.box", "race.hcl")
	if s := c.MustState().Sandboxes["sandbox.box"].Status; s != "stopped" {
		t.Fatalf("sandbox.box after the first apply: %s, want stopped", s)
	}
	a := c.start(nil, "apply", "-auto-approve", "race.hcl")
	sb := c.box(p)
	poll(t, "step 12 to start", func() bool {
		s := logSteps(t, sb)
		return len(s) > 0 && s[len(s)-1] == raceHold
	})
	return c, a, sb
}

func release(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	if err := sb.WriteFile(context.Background(), "release", []byte("go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDockerExecDuringApply: the reported race. While an apply runs a
// multi-step pipeline on a docker sandbox that was stopped before it, exec
// and tool call -sandbox fail at once with the lock message instead of
// starting and then stopping the container under the run; exec with
// -lock-timeout waits and runs after the apply. Every step succeeds once
// and the run completes.
func TestDockerExecDuringApply(t *testing.T) {
	p := testProvider(t)
	c, a, sb := startHeldApply(t, p)

	for _, args := range [][]string{
		{"exec", "-config=race.hcl", "sandbox.box", "--", "sh", "-c", "echo exec >> log.txt"},
		{"tool", "call", "exec_command", "-config=race.hcl", "-sandbox", "sandbox.box", "-args", `{"cmd": "echo tool >> log.txt"}`},
	} {
		out, code := c.Run(args...)
		if code != 1 {
			t.Fatalf("%s during apply: exit %d, want 1\n%s", args[0], code, out)
		}
		mustContain(t, args[0]+" during apply", out, "locked by another agentctl", fmt.Sprintf("PID %d", a.cmd.Process.Pid), `"apply"`, "-lock-timeout")
	}

	waiter := c.start([]string{"AGENTCTL_LOG=debug"}, "exec", "-config=race.hcl", "-lock-timeout=5m", "sandbox.box", "--", "sh", "-c", "echo exec >> log.txt; cat log.txt")
	poll(t, "exec to wait for the lock", func() bool { return strings.Contains(waiter.out.String(), "taking the state lock") })
	release(t, sb)
	if code := a.wait(t); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, a.out)
	}
	if code := waiter.wait(t); code != 0 {
		t.Fatalf("waiting exec: exit %d\n%s", code, waiter.out)
	}
	st := c.MustState()
	if r := st.Runs["run.job"]; r == nil || r.Status != "completed" || r.Turns != raceSteps+1 {
		t.Fatalf("run.job: %+v", r)
	}
	// Every step ran once, and the waiting exec after all of them: its
	// line comes last.
	var want strings.Builder
	for i := 1; i <= raceSteps; i++ {
		fmt.Fprintf(&want, "step %d\n", i)
	}
	want.WriteString("exec\n")
	if got := c.Exec("sandbox.box", "cat log.txt"); got != want.String() {
		t.Fatalf("log.txt:\n%s\nwant:\n%s", got, want.String())
	}
	insp, err := p.Client().ContainerInspect(context.Background(), st.Sandboxes["sandbox.box"].Session.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if insp.Container.State.Running {
		t.Fatal("the sandbox was left running after the apply and the exec")
	}
}

// TestDockerStopDuringRun: the container is stopped from outside (docker
// stop) while step 12 runs. The run is not completed: apply fails saying
// the sandbox stopped, step 12 is not recorded, plan proposes to resume
// the run, and the next apply starts the container again, runs step 12
// again and completes the run with every step's effect in the workspace.
func TestDockerStopDuringRun(t *testing.T) {
	p := testProvider(t)
	c, a, sb := startHeldApply(t, p)
	id := c.MustState().Sandboxes["sandbox.box"].Session.ID
	if _, err := p.Client().ContainerStop(context.Background(), id, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t); code != 1 {
		t.Fatalf("apply whose container was stopped: exit %d, want 1\n%s", code, a.out)
	}
	t.Logf("apply whose container was stopped:\n%s", a.out)
	mustContain(t, "apply", a.out.String(), "sandbox.box stopped during the run: exec_command", "runs again when the run resumes")
	st := c.MustState()
	r := st.Runs["run.job"]
	if r == nil || r.Status != "failed" || !strings.Contains(r.Error, "sandbox.box stopped during the run") {
		t.Fatalf("run.job after the stop: %+v", r)
	}
	if n := journalTools(t, c, r.Journal); n != raceHold-1 {
		t.Fatalf("journal holds %d tool results, want %d: the call in flight is not recorded", n, raceHold-1)
	}
	out, code := c.Run("plan", "-detailed-exitcode", "race.hcl")
	if code != 2 {
		t.Fatalf("plan after the stop: exit %d\n%s", code, out)
	}
	mustContain(t, "plan after the stop", out, "# run.job will be resumed", fmt.Sprintf("failed at turn %d: sandbox.box stopped during the run", raceHold), "0 runs to execute, 1 to resume")
	release(t, sb) // written into the stopped container
	out = c.OK("apply", "-auto-approve", "race.hcl")
	mustContain(t, "resumed apply", out, "0 runs executed, 1 resumed")
	st = c.MustState()
	if r := st.Runs["run.job"]; r.Status != "completed" || r.Turns != raceSteps+1 {
		t.Fatalf("run.job after the resume: %+v", r)
	}
	var want []int
	for i := 1; i <= raceSteps; i++ {
		want = append(want, i)
		if i == raceHold {
			want = append(want, i) // in flight when stopped, run again on resume
		}
	}
	if got := logSteps(t, c.box(p)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
}

// journalTools counts the tool results in a run's journal.
func journalTools(t *testing.T, c *cli, rel string) int {
	t.Helper()
	n := 0
	_, err := statefile.ReadJournal(filepath.Join(c.StateDir(), rel), func(raw json.RawMessage) error {
		var s agentloop.Step
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		if s.Kind == agentloop.StepTool {
			n++
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return n
}

// TestWorkspaceReportsStopDuringExec: a command killed because its
// container was stopped is a sandbox failure, not an exit status for the
// model; a command that kills itself in a running container is an exit
// status.
func TestWorkspaceReportsStopDuringExec(t *testing.T) {
	p := testProvider(t)
	sb := newSandbox(t, testSpec(t))
	ws := &sandbox.Workspace{Sandbox: sb, Address: "sandbox.box"}
	ctx := context.Background()
	res, err := ws.Exec(ctx, sandbox.ExecRequest{Shell: "kill -9 $$"})
	if err != nil || res.ExitCode != 137 {
		t.Fatalf("a command that killed itself: exit %d, %v", res.ExitCode, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ws.Exec(ctx, sandbox.ExecRequest{Shell: "touch started; sleep 60"})
		done <- err
	}()
	poll(t, "the command to start", func() bool { _, err := sb.Stat(ctx, "started"); return err == nil })
	if _, err := p.Client().ContainerStop(ctx, sb.ID(), client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	err = <-done
	ue, ok := errors.AsType[*sandbox.UnavailableError](err)
	if !ok || ue.Name() != "sandbox.box" || ue.What() != "stopped" {
		t.Fatalf("command killed by docker stop: %v", err)
	}
	_, err = ws.Exec(ctx, sandbox.ExecRequest{Shell: "true"})
	if ue, ok := errors.AsType[*sandbox.UnavailableError](err); !ok || ue.What() != "stopped" {
		t.Fatalf("command in the stopped container: %v", err)
	}
	if _, err := p.Client().ContainerRemove(ctx, sb.ID(), client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	_, err = ws.Exec(ctx, sandbox.ExecRequest{Shell: "true"})
	if ue, ok := errors.AsType[*sandbox.UnavailableError](err); !ok || ue.What() != "was deleted" {
		t.Fatalf("command in the removed container: %v", err)
	}
}
