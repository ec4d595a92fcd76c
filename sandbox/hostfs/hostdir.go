//go:build unix

package hostfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/creack/pty"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// HostDir is a Sandbox whose workspace is a host directory and whose
// commands run as plain host processes with no isolation at all: the
// local provider's isolation = "none" mode, and the sandbox used by tests
// of the layers above. File operations are confined to the directory by
// the embedded Dir; commands are not confined in any way.
type HostDir struct {
	*Dir
}

// NewHostDir opens root (which must exist) as an unisolated sandbox.
func NewHostDir(root string) (*HostDir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", root, err)
	}
	d, err := OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	return &HostDir{Dir: d}, nil
}

var (
	_ sandbox.Sandbox        = (*HostDir)(nil)
	_ sandbox.HostTreeCopier = (*HostDir)(nil)
)

// ID is the host path of the workspace.
func (h *HostDir) ID() string { return h.Path() }

// Session records the workspace path.
func (h *HostDir) Session() sandbox.SessionState {
	data, _ := json.Marshal(map[string]string{"root": h.Path(), "isolation": "none"})
	return sandbox.SessionState{Provider: "local", ID: h.Path(), Data: data}
}

// Start does nothing: there is nothing to start.
func (h *HostDir) Start(ctx context.Context) error { return nil }

// Stop does nothing.
func (h *HostDir) Stop(ctx context.Context) error { return nil }

// WorkspaceDir is the workspace: snapshots archive it directly.
func (h *HostDir) WorkspaceDir() *Dir { return h.Dir }

// Delete removes the workspace directory, however deep its tree.
func (h *HostDir) Delete(ctx context.Context) error {
	if err := RemoveAll(h.Path()); err != nil {
		return fmt.Errorf("delete workspace %s: %w", h.Path(), err)
	}
	return nil
}

// Refresh reports running while the directory exists, missing otherwise.
func (h *HostDir) Refresh(ctx context.Context) (sandbox.Status, error) {
	st, err := os.Stat(h.Path())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return sandbox.StatusMissing, nil
	case err != nil:
		return "", fmt.Errorf("refresh workspace %s: %w", h.Path(), err)
	case !st.IsDir():
		return sandbox.StatusMissing, nil
	}
	return sandbox.StatusRunning, nil
}

// PortURL is http://127.0.0.1:PORT: host processes listen on the host.
func (h *HostDir) PortURL(ctx context.Context, port int) (string, error) {
	if port <= 0 || port > 65535 {
		return "", fmt.Errorf("port %d is not a TCP port (1-65535)", port)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port), nil
}

// BaseEnv is the environment every command starts from in a HostDir:
// the host's own environment is not passed through.
func BaseEnv(home string) map[string]string {
	return map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": home,
		"LANG": "C.UTF-8",
	}
}

// Exec runs req as a host process in the workspace. The process gets its
// own process group; a timeout (or cancelled ctx) kills the whole group.
// A non-zero exit is not an error; failing to start is.
func (h *HostDir) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if req.User != "" {
		return sandbox.ExecResult{}, fmt.Errorf("exec: cannot run as user %q: a host directory has no users of its own; run_as needs a sandbox whose manifest declares the user", req.User)
	}
	wd, err := sandbox.CleanPath("", req.Workdir)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec: workdir: %w", err)
	}
	// Resolve the workdir beneath the root so a symlink cannot point the
	// command elsewhere, then run it there by path.
	f, err := h.openDir(wd)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec: %w", pathErr("workdir", req.Workdir, err))
	}
	f.Close()
	argv := req.Argv
	if len(argv) == 0 {
		if req.Shell == "" {
			return sandbox.ExecResult{}, errors.New("exec: neither argv nor a shell command given")
		}
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	env := BaseEnv(h.Path())
	maps.Copy(env, req.Env)
	return RunProcess(ctx, ProcessSpec{
		Argv:        argv,
		Dir:         filepath.Join(h.Path(), filepath.FromSlash(wd)),
		Env:         env,
		Stdin:       req.Stdin,
		Timeout:     req.Timeout,
		OutputLimit: req.OutputLimit,
	})
}

// ProcessSpec is one host process for RunProcess.
type ProcessSpec struct {
	Argv  []string
	Dir   string
	Env   map[string]string
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the output as it comes instead
	// of the head+tail capture (the result then holds no output).
	Stdout, Stderr io.Writer
	// TTY runs the process in a new session on a pseudo-terminal of Rows
	// x Cols, its controlling terminal: Stdin feeds it, Stdout receives
	// everything the process writes (Stderr is unused).
	TTY         bool
	Rows, Cols  int
	Timeout     time.Duration
	OutputLimit int
	// SysProcAttr, when set, is used instead of a plain new process group;
	// Setpgid is forced on so the group can be killed.
	SysProcAttr *syscall.SysProcAttr
	// Path, when set, is the program to run (Argv[0] is then only the
	// name the program sees); otherwise Argv[0] is looked up in
	// agentctl's own PATH.
	Path string
	// KillGroupOnExit kills what is left of the process group as soon as
	// the command itself exits, so background jobs do not outlive it.
	KillGroupOnExit bool
}

// RunProcess runs a host process with head+tail output capture and a
// process-group kill on timeout or cancellation. Providers that run their
// commands as host processes (the local provider's isolation "none") share
// it. A process killed by a signal reports 128+signal, as shells do.
func RunProcess(ctx context.Context, ps ProcessSpec) (sandbox.ExecResult, error) {
	if len(ps.Argv) == 0 {
		return sandbox.ExecResult{}, errors.New("exec: empty command")
	}
	runCtx := ctx
	if ps.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, ps.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(runCtx, ps.Argv[0], ps.Argv[1:]...)
	if ps.Path != "" {
		cmd.Path, cmd.Err = ps.Path, nil
	}
	cmd.Dir = ps.Dir
	keys := slices.Sorted(maps.Keys(ps.Env))
	cmd.Env = make([]string, 0, len(keys))
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+ps.Env[k])
	}
	if ps.Stdin != nil && !ps.TTY {
		if err := pipeStdin(cmd, ps.Stdin); err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("exec: %w", err)
		}
	}
	stdout, stderr := sandbox.NewHeadTail(ps.OutputLimit), sandbox.NewHeadTail(ps.OutputLimit)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if ps.Stdout != nil {
		cmd.Stdout = ps.Stdout
	}
	if ps.Stderr != nil {
		cmd.Stderr = ps.Stderr
	}
	attr := ps.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	if ps.TTY {
		// A session leader's group id is its pid too.
		attr.Setsid, attr.Setctty, attr.Ctty, attr.Setpgid = true, true, 0, false
		closeTTY, err := attachTTY(cmd, ps)
		if err != nil {
			return sandbox.ExecResult{}, err
		}
		defer closeTTY()
	} else {
		attr.Setpgid = true
	}
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error {
		// The group id is the child's pid (Setpgid with Pgid 0).
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Descendants that escaped the group could hold the pipes open.
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		if ps.KillGroupOnExit {
			go killGroupOnExit(cmd.Process.Pid)
		}
		err = cmd.Wait()
		if ps.KillGroupOnExit {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	code := 0
	if st := cmd.ProcessState; st != nil {
		code = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	res := sandbox.CapturedResult(stdout, stderr, code, time.Since(start), false)
	if ps.Timeout > 0 && errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		res.TimedOut = true
		if res.ExitCode == 0 {
			res.ExitCode = -1
		}
		return res, nil
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return res, fmt.Errorf("exec %s: %w", ps.Argv[0], err)
	}
	return res, nil
}

// pipeStdin feeds r to cmd through a pipe whose copying goroutine Wait
// does not wait for (exec.Cmd waits for its own until r ends): a process
// that exits while its caller still holds its input open (an attached
// process whose caller has not closed stdin) must not keep Wait, and
// with it the end of the process's output, waiting for more input. The
// goroutine ends at r's next read or the pipe's next write failing,
// which Wait closes once the process exited.
func pipeStdin(cmd *exec.Cmd, r io.Reader) error {
	if f, ok := r.(*os.File); ok {
		cmd.Stdin = f
		return nil
	}
	w, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	go func() {
		io.Copy(w, r)
		w.Close()
	}()
	return nil
}

// attachTTY gives cmd a new pseudo-terminal on its stdio: ps.Stdin is
// copied to it and its output to ps.Stdout. close waits for the output
// and releases the terminal once the command has been waited for.
func attachTTY(cmd *exec.Cmd, ps ProcessSpec) (closeTTY func(), err error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	rows, cols := ps.Rows, ps.Cols
	if rows == 0 || cols == 0 {
		rows, cols = sandbox.DefaultTTYRows, sandbox.DefaultTTYCols
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)}); err != nil {
		ptmx.Close()
		tty.Close()
		return nil, fmt.Errorf("sizing the pseudo-terminal: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	out := ps.Stdout
	if out == nil {
		out = io.Discard
	}
	drained := make(chan struct{})
	go func() {
		io.Copy(out, ptmx) // ends with EIO once every holder of the terminal is gone
		close(drained)
	}()
	if ps.Stdin != nil {
		go io.Copy(ptmx, ps.Stdin)
	}
	return func() {
		tty.Close()
		select {
		case <-drained:
		case <-time.After(2 * time.Second):
		}
		ptmx.Close()
	}, nil
}
