//go:build unix

package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// reporting is a host-directory sandbox whose provider answers Refresh
// with status and err, and whose Exec fails with execErr when set.
type reporting struct {
	*hostfs.HostDir
	status  sandbox.Status
	err     error
	execErr error
}

func (r *reporting) Refresh(context.Context) (sandbox.Status, error) { return r.status, r.err }

func (r *reporting) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if r.execErr != nil {
		return sandbox.ExecResult{ExitCode: -1}, r.execErr
	}
	return r.HostDir.Exec(ctx, req)
}

func TestUnavailableAsksTheProvider(t *testing.T) {
	hd, err := hostfs.NewHostDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	ctx := context.Background()
	missingFile := fmt.Errorf("read %q: %w", "x", fs.ErrNotExist)
	// A 404 for a file may wrap ErrNotFound: only the provider's answer
	// makes it the sandbox's failure.
	fileGone := fmt.Errorf("toolbox: download x: %w", sandbox.ErrNotFound)
	lost := sandbox.MarkUnavailable(errors.New("the sandbox's init process died while running sh"))
	for _, c := range []struct {
		name        string
		sb          *reporting
		err         error
		want        string // "" = the error is the tool's
		keepsTheMsg bool
	}{
		{"tool failure in a running sandbox", &reporting{HostDir: hd, status: sandbox.StatusRunning}, missingFile, "", true},
		{"404 for a file in a running sandbox", &reporting{HostDir: hd, status: sandbox.StatusRunning}, fileGone, "", true},
		{"failure of a stopped sandbox", &reporting{HostDir: hd, status: sandbox.StatusStopped}, missingFile, "stopped", true},
		{"failure of a deleted sandbox", &reporting{HostDir: hd, status: sandbox.StatusMissing}, missingFile, "was deleted", true},
		{"refresh says not found", &reporting{HostDir: hd, err: fmt.Errorf("inspect: %w", sandbox.ErrNotFound)}, missingFile, "was deleted", true},
		{"provider unreachable", &reporting{HostDir: hd, err: errors.New("connection refused")}, missingFile, "could not be reached", false},
		{"lost although running", &reporting{HostDir: hd, status: sandbox.StatusRunning}, lost, "failed", true},
	} {
		ws := &sandbox.Workspace{Sandbox: c.sb, Address: "sandbox.box"}
		got := ws.Unavailable(ctx, c.err)
		ue, ok := errors.AsType[*sandbox.UnavailableError](got)
		switch {
		case c.want == "" && ok:
			t.Errorf("%s: %v became a sandbox failure", c.name, got)
		case c.want != "" && !ok:
			t.Errorf("%s: %v is not a sandbox failure", c.name, got)
		case ok && (ue.What() != c.want || ue.Name() != "sandbox.box"):
			t.Errorf("%s: %s %s, want sandbox.box %s", c.name, ue.Name(), ue.What(), c.want)
		case c.keepsTheMsg && got.Error() != c.err.Error():
			t.Errorf("%s: message %q, want %q", c.name, got, c.err)
		case !errors.Is(got, c.err):
			t.Errorf("%s: %v does not wrap %v", c.name, got, c.err)
		}
	}
	if got := (&sandbox.Workspace{Sandbox: &reporting{HostDir: hd, status: sandbox.StatusStopped}}).Unavailable(ctx, nil); got != nil {
		t.Errorf("nil became %v", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if got := (&sandbox.Workspace{Sandbox: &reporting{HostDir: hd, status: sandbox.StatusStopped}}).Unavailable(cancelled, missingFile); got != missingFile {
		t.Errorf("a failure after cancellation became %v", got)
	}

	// Exec classifies its own failures.
	ws := &sandbox.Workspace{Sandbox: &reporting{HostDir: hd, status: sandbox.StatusStopped, execErr: errors.New("container is not running")}, Address: "sandbox.box"}
	if _, err := ws.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); err == nil {
		t.Fatal("exec in a stopped sandbox succeeded")
	} else if ue, ok := errors.AsType[*sandbox.UnavailableError](err); !ok || ue.What() != "stopped" {
		t.Fatalf("exec in a stopped sandbox: %v", err)
	}
	// A command killed by a signal while the sandbox stopped.
	ws = &sandbox.Workspace{Sandbox: &reporting{HostDir: hd, status: sandbox.StatusStopped}, Address: "sandbox.box"}
	res, err := ws.Exec(ctx, sandbox.ExecRequest{Shell: "kill -9 $$"})
	if ue, ok := errors.AsType[*sandbox.UnavailableError](err); !ok || ue.What() != "stopped" {
		t.Fatalf("command killed as the sandbox stopped: exit %d, %v", res.ExitCode, err)
	}
	// An ordinary non-zero exit is the command's result.
	res, err = ws.Exec(ctx, sandbox.ExecRequest{Shell: "exit 3"})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("exit 3: %d %v", res.ExitCode, err)
	}
}
