package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// hostSandbox is a test harness: a sandbox.Sandbox over a host directory,
// with os.Root confining file access and os/exec running commands.
type hostSandbox struct {
	dir  string
	root *os.Root
}

func newHostSandbox(t *testing.T, dir string) *hostSandbox {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &hostSandbox{dir: dir, root: r}
}

// newHostWorkspace returns a workspace over a fresh temporary directory.
func newHostWorkspace(t *testing.T) (*sandbox.Workspace, string) {
	dir := t.TempDir()
	return &sandbox.Workspace{Sandbox: newHostSandbox(t, dir)}, dir
}

func (h *hostSandbox) name(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// wrap maps os.Root's escape errors to sandbox.ErrPathEscape.
func wrap(err error) error {
	if err != nil && strings.Contains(err.Error(), "escapes") {
		return fmt.Errorf("%w: %w", sandbox.ErrPathEscape, err)
	}
	return err
}

func (h *hostSandbox) ID() string { return h.dir }
func (h *hostSandbox) Session() sandbox.SessionState {
	return sandbox.SessionState{Provider: "host", ID: h.dir}
}
func (h *hostSandbox) Start(context.Context) error  { return nil }
func (h *hostSandbox) Stop(context.Context) error   { return nil }
func (h *hostSandbox) Delete(context.Context) error { return os.RemoveAll(h.dir) }
func (h *hostSandbox) Refresh(context.Context) (sandbox.Status, error) {
	return sandbox.StatusRunning, nil
}
func (h *hostSandbox) PortURL(context.Context, int) (string, error) {
	return "", errors.New("no ports")
}
func (h *hostSandbox) CopyIn(context.Context, string, io.Reader) error {
	return errors.New("not supported")
}
func (h *hostSandbox) CopyOut(context.Context, string) (io.ReadCloser, error) {
	return nil, errors.New("not supported")
}

func (h *hostSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	argv := req.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(h.dir, filepath.FromSlash(req.Workdir))
	cmd.Env = os.Environ()
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	cmd.Stdin = req.Stdin
	stdout, stderr := sandbox.NewHeadTail(req.OutputLimit), sandbox.NewHeadTail(req.OutputLimit)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	err := cmd.Run()
	res := sandbox.ExecResult{
		Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Wall: time.Since(start),
		Truncated:      stdout.Truncated() || stderr.Truncated(),
		OriginalStdout: stdout.Total(), OriginalStderr: stderr.Total(),
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() == context.DeadlineExceeded:
		res.TimedOut, res.ExitCode = true, -1
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	default:
		return res, err
	}
	return res, nil
}

func (h *hostSandbox) ReadFile(_ context.Context, p string, limit int64) ([]byte, error) {
	f, err := h.root.Open(h.name(p))
	if err != nil {
		return nil, wrap(err)
	}
	defer f.Close()
	r := io.Reader(f)
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, limit)
	}
	return b, nil
}

func (h *hostSandbox) WriteFile(_ context.Context, p string, data []byte, mode fs.FileMode) error {
	if dir := path.Dir(p); dir != "." {
		if err := h.root.MkdirAll(dir, 0o755); err != nil {
			return wrap(err)
		}
	}
	return wrap(h.root.WriteFile(p, data, mode))
}

func (h *hostSandbox) Remove(_ context.Context, p string) error { return wrap(h.root.Remove(p)) }
func (h *hostSandbox) Mkdir(_ context.Context, p string) error {
	return wrap(h.root.MkdirAll(h.name(p), 0o755))
}

func (h *hostSandbox) info(p string, fi fs.FileInfo) sandbox.FileInfo {
	out := sandbox.FileInfo{Path: p, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
	if fi.Mode()&fs.ModeSymlink != 0 {
		out.Target, _ = h.root.Readlink(p)
	}
	return out
}

func (h *hostSandbox) Stat(_ context.Context, p string) (sandbox.FileInfo, error) {
	fi, err := h.root.Lstat(h.name(p))
	if err != nil {
		return sandbox.FileInfo{}, wrap(err)
	}
	return h.info(p, fi), nil
}

func (h *hostSandbox) ReadDir(_ context.Context, p string) ([]sandbox.FileInfo, error) {
	f, err := h.root.Open(h.name(p))
	if err != nil {
		return nil, wrap(err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []sandbox.FileInfo
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, h.info(path.Join(p, e.Name()), fi))
	}
	return out, nil
}

// snapshot maps every path under dir to "dir" or "file:<bytes>".
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return snap
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() {
			snap[filepath.ToSlash(rel)] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		snap[filepath.ToSlash(rel)] = "file:" + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// copyTree copies the contents of src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
