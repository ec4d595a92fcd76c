package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// forkBombShell forks two copies of itself in the background, each of
// which does the same, then spins: the container's pids fill with
// processes that each want a CPU. "bomb-1007" names them in ps.
const forkBombShell = `: bomb-1007; b() { b & b & while :; do :; done; }; b`

// forkBombPIDs bounds the bomb (the machine running the tests is shared).
const forkBombPIDs = 128

// hangGuard is how long a call that must return may take before the test
// calls it hung. It is generous: it fails only a hang, it measures no
// speed.
const hangGuard = 2 * time.Minute

// forkBomb is an exec of forkBombShell whose every process carries a
// 64 KiB environment variable, which a kill helper reading
// /proc/PID/environ has to get through.
func forkBomb(timeout time.Duration) sandbox.ExecRequest {
	return sandbox.ExecRequest{Shell: forkBombShell, Env: map[string]string{"BIG": strings.Repeat("x", 64<<10)}, Timeout: timeout}
}

// execGuarded runs req, failing the test when Exec has not returned
// within hangGuard.
func execGuarded(t *testing.T, ctx context.Context, sb *Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	t.Helper()
	type result struct {
		res sandbox.ExecResult
		err error
	}
	ch := make(chan result, 1)
	go func() {
		res, err := sb.Exec(ctx, req)
		ch <- result{res, err}
	}()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	select {
	case r := <-ch:
		return r.res, r.err
	case <-guard.C:
		t.Fatalf("Exec %q has not returned after %v", req.Shell, hangGuard)
		return sandbox.ExecResult{}, nil
	}
}

// assertBombGone checks that the sandbox runs a command again and that no
// process of the bomb is left.
func assertBombGone(t *testing.T, sb *Sandbox) {
	t.Helper()
	res, err := execGuarded(t, context.Background(), sb, sandbox.ExecRequest{Shell: "echo ok; ps -o args"})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "ok\n") {
		t.Fatalf("the sandbox after the fork bomb: exit %d, %v, stdout %q, stderr %q", res.ExitCode, err, res.Stdout, res.Stderr)
	}
	if n := strings.Count(string(res.Stdout), "bomb-1007"); n > 0 {
		t.Fatalf("%d fork bomb processes left:\n%s", n, res.Stdout)
	}
}

// TestExecTimeoutForkBomb: a fork bomb of spinning processes starves a
// kill helper exec'd into the container; the timed-out command still
// returns, as timed out, the bomb is gone and the sandbox runs the next
// command.
func TestExecTimeoutForkBomb(t *testing.T) {
	spec := testSpec(t)
	spec.Resources.PIDs = forkBombPIDs
	sb := newSandbox(t, spec)
	res, err := execGuarded(t, context.Background(), sb, forkBomb(3*time.Second))
	if err != nil {
		t.Fatalf("fork bomb: %v", err)
	}
	if !res.TimedOut {
		t.Fatalf("fork bomb did not time out: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	t.Logf("fork bomb: exit %d, stderr ends %q", res.ExitCode, res.Stderr[max(0, len(res.Stderr)-300):])
	assertBombGone(t, sb)
}

// TestExecCancelForkBomb: cancelling the context of a fork bomb's exec
// (agentctl interrupted) returns, and leaves no bomb behind.
func TestExecCancelForkBomb(t *testing.T) {
	spec := testSpec(t)
	spec.Resources.PIDs = forkBombPIDs
	sb := newSandbox(t, spec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { time.Sleep(3 * time.Second); cancel() }()
	_, err := execGuarded(t, ctx, sb, forkBomb(0))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("fork bomb with a cancelled context: %v", err)
	}
	t.Logf("fork bomb cancelled: %v", err)
	assertBombGone(t, sb)
}

// forkBombHCL is a run whose agent runs the fork bomb (each process with
// a 64 KiB environment variable, exported before the bomb's shell is
// exec'd) under a 3-second shell timeout, then one more command.
const forkBombHCL = `
provider "scripted" {
  script "worker" {
    reply {
      call "exec_command" {
        arguments = { cmd = "x=x; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do x=$x$x; done; export BIG=$x; exec /bin/sh -c '` + forkBombShell + `'" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "echo after the bomb > after.txt" }
      }
    }
    reply { text = "survived" }
  }
}

provider "docker" {}

sandbox "box" {
  provider = provider.docker
  image    = "` + TestImage + `"
  on_exit  = "stop"
  resources {
    pids = 128
  }
}

capability "shell" "default" {
  timeout = "3s"
}

agent "worker" {
  provider     = provider.scripted
  instructions = "Run the commands."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}

run "bomb" {
  agent = agent.worker
  input = "Go."
}
`

// TestDockerForkBombApply: an apply whose agent runs a fork bomb ends (it
// used to hang for minutes past the shell timeout), the agent's next
// command runs, and the run completes.
func TestDockerForkBombApply(t *testing.T) {
	p := testProvider(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bomb.hcl"), []byte(forkBombHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, dir, "bomb.hcl")
	c.destroyOnCleanup(p)
	c.Timeout = hangGuard
	out, code := c.Run("apply", "-auto-approve", "bomb.hcl")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if r := c.MustState().Runs["run.bomb"]; r == nil || r.Status != "completed" {
		t.Fatalf("run.bomb: %+v\n%s", r, out)
	}
	if got := c.Exec("sandbox.box", "cat after.txt; ps -o args"); !strings.HasPrefix(got, "after the bomb\n") || strings.Contains(got, "bomb-1007") {
		t.Fatalf("the sandbox after the apply:\n%s", got)
	}
}
