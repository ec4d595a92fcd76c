package local

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
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentctl/agentctl/engine/sandbox"
)

// DefaultPath is the PATH commands start with.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TimeoutExitCode is the exit code reported when a command was killed by
// its timeout (as timeout(1) reports); ExecResult.TimedOut is set too.
const TimeoutExitCode = 124

// ioGrace bounds how long output is drained after the command exited
// (isolation "none" only: a process that left the process group may keep
// the pipes open).
const ioGrace = 2 * time.Second

// execRun is one command, validated and ready for a runner.
type execRun struct {
	argv    []string
	dir     string // workspace-relative, clean ("." = root)
	env     []string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	timeout time.Duration
}

// Exec runs one command: argv, or Shell through /bin/sh -c.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := s.exists(); err != nil {
		return sandbox.ExecResult{}, err
	}
	s.mu.Lock()
	st := s.status
	s.mu.Unlock()
	if st == sandbox.StatusStopped {
		return sandbox.ExecResult{}, fmt.Errorf("local sandbox %s is stopped: start it (agentctl apply) before running commands", s.spec.Address)
	}
	argv := req.Argv
	if len(argv) == 0 {
		if req.Shell == "" {
			return sandbox.ExecResult{}, errors.New("exec: neither a command (argv) nor a shell string was given")
		}
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	if argv[0] == "" {
		return sandbox.ExecResult{}, errors.New("exec: the program name is empty")
	}
	dir, err := relPath(req.Workdir)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec: workdir: %w", err)
	}
	fi, err := s.root.Stat(dir)
	if err != nil {
		return sandbox.ExecResult{}, s.fileErr("exec: workdir", req.Workdir, err)
	}
	if !fi.IsDir() {
		return sandbox.ExecResult{}, fmt.Errorf("exec: workdir %s is not a directory", req.Workdir)
	}
	home := s.spec.Root
	if s.p.opts.Isolation == IsolationNone {
		home = s.ws
	}
	env := map[string]string{"PATH": DefaultPath, "HOME": home, "LANG": "C.UTF-8", "USER": "root", "LOGNAME": "root", "TERM": "dumb"}
	if s.p.opts.Isolation == IsolationNone {
		delete(env, "USER")
		delete(env, "LOGNAME")
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return sandbox.ExecResult{}, fmt.Errorf("exec: invalid environment variable name or value for %q", k)
		}
		env[k] = v
	}
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	slices.Sort(envList)

	stdout := sandbox.NewHeadTail(req.OutputLimit)
	stderr := sandbox.NewHeadTail(req.OutputLimit)
	run := &execRun{argv: argv, dir: dir, env: envList, stdin: req.Stdin, stdout: stdout, stderr: stderr, timeout: req.Timeout}

	start := time.Now()
	var code int
	var timedOut bool
	if s.p.opts.Isolation == IsolationNone {
		code, timedOut, err = s.runNone(ctx, run)
	} else {
		code, timedOut, err = s.runNamespaced(ctx, run, false)
	}
	res := sandbox.ExecResult{
		ExitCode:       code,
		Stdout:         stdout.Bytes(),
		Stderr:         stderr.Bytes(),
		Wall:           time.Since(start),
		Truncated:      stdout.Truncated() || stderr.Truncated(),
		OriginalStdout: stdout.Total(),
		OriginalStderr: stderr.Total(),
		TimedOut:       timedOut,
	}
	if timedOut {
		res.ExitCode = TimeoutExitCode
	}
	return res, err
}

// runProcess starts cmd with its output on pipes drained into run's
// writers, waits for it, calls afterExit (to kill what is left), and
// drains the output. The command's context (timeout, cancellation) kills
// the process through cmd.Cancel.
func runProcess(cmd *exec.Cmd, run *execRun, afterStart func() error, afterExit func()) (code int, err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return -1, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.Stdin = run.stdin
	cmd.WaitDelay = ioGrace
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return -1, err
	}
	outW.Close()
	errW.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(run.stdout, outR); done <- struct{}{} }()
	go func() { io.Copy(run.stderr, errR); done <- struct{}{} }()

	var startErr error
	if afterStart != nil {
		if startErr = afterStart(); startErr != nil {
			cmd.Process.Kill()
		}
	}
	waitErr := cmd.Wait()
	if afterExit != nil {
		afterExit()
	}
	grace := time.NewTimer(ioGrace)
	for i := 0; i < 2; i++ {
		select {
		case <-done:
		case <-grace.C:
			outR.Close()
			errR.Close()
			<-done
		}
	}
	grace.Stop()
	outR.Close()
	errR.Close()

	if startErr != nil {
		return -1, startErr
	}
	ps := cmd.ProcessState
	if ps == nil {
		return -1, waitErr
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	} else {
		code = ps.ExitCode()
	}
	return code, nil
}

// withTimeout derives the command's context; timedOut reports whether it
// ended because of the timeout rather than the caller's ctx.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc, func() bool) {
	if d <= 0 {
		c, cancel := context.WithCancel(ctx)
		return c, cancel, func() bool { return false }
	}
	c, cancel := context.WithTimeout(ctx, d)
	return c, cancel, func() bool {
		return errors.Is(c.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	}
}

// runNone runs the command directly on the host, in its own process
// group, which is killed on timeout and when the command exits.
func (s *Sandbox) runNone(ctx context.Context, run *execRun) (int, bool, error) {
	prog, err := lookPath(run.argv[0], envValue(run.env, "PATH"), filepath.Join(s.ws, run.dir))
	if err != nil {
		fmt.Fprintf(run.stderr, "%s: %v\n", run.argv[0], err)
		return notFoundCode(err), false, nil
	}
	tctx, cancel, timedOut := withTimeout(ctx, run.timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, prog)
	cmd.Args = run.argv
	cmd.Env = run.env
	cmd.Dir = filepath.Join(s.ws, filepath.FromSlash(run.dir))
	cmd.SysProcAttr = groupSysProcAttr()
	killGroup := func() {
		if cmd.Process != nil {
			killProcessGroup(cmd.Process)
		}
	}
	cmd.Cancel = func() error { killGroup(); return nil }
	code, err := runProcess(cmd, run, nil, killGroup)
	if ctx.Err() != nil {
		return code, false, ctx.Err()
	}
	if err != nil {
		return code, false, fmt.Errorf("exec %s: %w", run.argv[0], err)
	}
	return code, timedOut(), nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath resolves name against pathList (the command's PATH, not
// agentctl's), relative names against dir.
func lookPath(name, pathList, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !path.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := isExecutable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	var firstErr error
	for _, d := range filepath.SplitList(pathList) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		err := isExecutable(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && !errors.Is(err, fs.ErrNotExist) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", errors.New("command not found")
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", p, fs.ErrNotExist)
		}
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: is a directory: %w", p, fs.ErrPermission)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: %w", p, fs.ErrPermission)
	}
	return nil
}

// notFoundCode is the shell's exit code for a command that cannot run:
// 127 when missing, 126 when not executable.
func notFoundCode(err error) int {
	if errors.Is(err, fs.ErrPermission) {
		return 126
	}
	return 127
}
