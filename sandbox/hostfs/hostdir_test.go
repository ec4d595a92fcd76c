//go:build unix

package hostfs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

func TestHostDirExec(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	if err := h.Mkdir(ctx, "sub/dir"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTCTL_HOST_SECRET", "leak")

	res, err := h.Exec(ctx, sandbox.ExecRequest{Shell: `pwd; echo "$GREETING"; echo "[$AGENTCTL_HOST_SECRET]"; echo err >&2; exit 3`, Workdir: "sub/dir", Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	want := h.Path() + "/sub/dir\nhi\n[]\n"
	if string(res.Stdout) != want || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Errorf("Exec = %q %q %d; want %q", res.Stdout, res.Stderr, res.ExitCode, want)
	}
	if res.Wall <= 0 {
		t.Error("no wall time")
	}

	res, err = h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("from stdin")})
	if err != nil || string(res.Stdout) != "from stdin" {
		t.Errorf("stdin: %q, %v", res.Stdout, err)
	}

	res, err = h.Exec(ctx, sandbox.ExecRequest{Shell: "head -c 100000 /dev/zero | tr '\\0' x", OutputLimit: 1000})
	if err != nil || !res.Truncated || res.OriginalStdout != 100000 || !bytes.Contains(res.Stdout, []byte("truncated")) {
		t.Errorf("truncation: %v %d %v", res.Truncated, res.OriginalStdout, err)
	}

	if _, err := h.Exec(ctx, sandbox.ExecRequest{Shell: "true", Workdir: "../"}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("escaping workdir: %v", err)
	}
	os.Symlink("/etc", h.Path()+"/etc")
	if _, err := h.Exec(ctx, sandbox.ExecRequest{Shell: "true", Workdir: "etc"}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("symlinked workdir: %v", err)
	}
	if _, err := h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/no/such/binary"}}); err == nil {
		t.Error("missing binary: no error")
	}
}

func TestHostDirExecTimeoutKillsTree(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	// A background grandchild that would outlive the shell writes a marker
	// if it survives; the timeout must kill the whole process group.
	res, err := h.Exec(ctx, sandbox.ExecRequest{Shell: "(sleep 2; echo survived > marker) & sleep 30", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode == 0 {
		t.Errorf("TimedOut=%v ExitCode=%d", res.TimedOut, res.ExitCode)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(h.Path() + "/marker"); err == nil {
		t.Error("a grandchild survived the timeout")
	}
	// Cancelling the context also kills it and reports the context error.
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	if _, err := h.Exec(cctx, sandbox.ExecRequest{Shell: "sleep 30"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
}

func TestHostDirLifecycle(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	if st, err := h.Refresh(ctx); err != nil || st != sandbox.StatusRunning {
		t.Errorf("Refresh = %v, %v", st, err)
	}
	if u, err := h.PortURL(ctx, 8080); err != nil || u != "http://127.0.0.1:8080" {
		t.Errorf("PortURL = %q, %v", u, err)
	}
	if _, err := h.PortURL(ctx, 0); err == nil {
		t.Error("port 0 accepted")
	}
	if s := h.Session(); s.Provider != "local" || s.ID != h.Path() {
		t.Errorf("Session = %+v", s)
	}
	h.WriteFile(ctx, "a/b.txt", []byte("x"), 0)
	rc, err := h.CopyOut(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Contains(b, []byte("b.txt")) {
		t.Error("CopyOut lacks b.txt")
	}
	if err := h.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := h.Refresh(ctx); err != nil || st != sandbox.StatusMissing {
		t.Errorf("Refresh after delete = %v, %v", st, err)
	}
	if err := h.Delete(ctx); err != nil {
		t.Errorf("second Delete = %v", err)
	}
}

func newHostDir(t *testing.T) *HostDir {
	t.Helper()
	h, err := NewHostDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// A process that exits while its caller still holds its input open (an
// attached process whose stdin is not closed yet) ends: RunProcess does
// not wait for input nobody will read.
func TestRunProcessEndsWithStdinOpen(t *testing.T) {
	stdin, hold := io.Pipe()
	defer hold.Close()
	done := make(chan error, 1)
	go func() {
		res, err := RunProcess(context.Background(), ProcessSpec{Argv: []string{"sh", "-c", "read -r l; echo got $l; exit 4"}, Stdin: stdin, Dir: t.TempDir()})
		if err == nil && (res.ExitCode != 4 || string(res.Stdout) != "got one\n") {
			err = errors.New("exit " + strings.TrimSpace(string(res.Stdout)))
		}
		done <- err
	}()
	if _, err := io.WriteString(hold, "one\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunProcess did not return after the process exited, its stdin still open")
	}
}
