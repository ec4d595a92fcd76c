//go:build unix

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/local/internal/nsinit"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
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
	argv        []string
	dir         string // workspace-relative, clean ("." = root)
	env         map[string]string
	stdin       io.Reader
	timeout     time.Duration
	outputLimit int
	// tty runs the command on a pseudo-terminal of rows x cols.
	tty        bool
	rows, cols int
	// user is the manifest user the command runs as ("" = root).
	user string
}

// Exec runs one command: argv, or Shell through /bin/sh -c.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	run, err := s.prepare(ctx, req)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	run.stdin, run.timeout, run.outputLimit = req.Stdin, req.Timeout, req.OutputLimit
	var res sandbox.ExecResult
	if s.p.opts.Isolation == IsolationNone {
		res, err = s.runNone(ctx, run)
	} else {
		res, err = s.runNamespaced(ctx, run)
	}
	if res.TimedOut {
		res.ExitCode = TimeoutExitCode
	}
	return res, err
}

// StartProcess starts a command whose streams stay attached (an MCP
// server over stdio), in the same isolation as Exec.
func (s *Sandbox) StartProcess(ctx context.Context, req sandbox.ProcessRequest) (sandbox.Process, error) {
	run, err := s.prepare(ctx, sandbox.ExecRequest{Argv: req.Argv, Shell: req.Shell, Workdir: req.Workdir, Env: req.Env, User: req.User})
	if err != nil {
		return nil, err
	}
	if s.p.opts.Isolation == IsolationNone {
		dir := filepath.Join(s.ws, filepath.FromSlash(run.dir))
		prog, err := nsinit.LookPath(run.argv[0], run.env["PATH"], dir)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", run.argv[0], err)
		}
		return sandbox.StartStreamed(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
			res, err := hostfs.RunProcess(ctx, hostfs.ProcessSpec{
				Argv: run.argv, Path: prog, Dir: dir, Env: run.env, Stdin: stdin, Stdout: stdout, Stderr: stderr,
				SysProcAttr: groupSysProcAttr(), KillGroupOnExit: true,
				TTY: req.TTY, Rows: req.Rows, Cols: req.Cols,
			})
			return res.ExitCode, err
		}), nil
	}
	run.tty, run.rows, run.cols = req.TTY, req.Rows, req.Cols
	return s.startNamespaced(ctx, run)
}

// prepare validates req against the sandbox and builds the command's
// environment.
func (s *Sandbox) prepare(ctx context.Context, req sandbox.ExecRequest) (*execRun, error) {
	if err := s.exists(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	st := s.status
	s.mu.Unlock()
	if st == sandbox.StatusStopped {
		return nil, sandbox.MarkUnavailable(errors.New("the sandbox is stopped: start it (agentctl apply) before running commands"))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	argv, err := req.Command()
	if err != nil {
		return nil, err
	}
	if req.User != "" {
		if s.p.opts.Isolation == IsolationNone {
			return nil, fmt.Errorf("exec: cannot run as user %q: isolation \"none\" runs commands as the agentctl user and cannot switch users; use isolation \"namespaces\"", req.User)
		}
		if _, ok := s.spec.Accounts.User(req.User); !ok {
			return nil, fmt.Errorf("exec: %w", &sandbox.UnknownUserError{Name: req.User})
		}
	}
	dir, err := sandbox.CleanPath(s.spec.Root, req.Workdir)
	if err != nil {
		return nil, fmt.Errorf("exec: workdir: %w", err)
	}
	// Resolved beneath the workspace: a symlink cannot point the command
	// elsewhere.
	wd, err := s.wsd.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("exec: workdir: %w", err)
	}
	wd.Close()
	none := s.p.opts.Isolation == IsolationNone
	home := s.spec.Root
	if none {
		home = s.ws
	}
	who := "root"
	if req.User != "" {
		who = req.User
	}
	env := map[string]string{"PATH": DefaultPath, "HOME": home, "LANG": "C.UTF-8", "USER": who, "LOGNAME": who, "TERM": "dumb"}
	if none {
		delete(env, "USER")
		delete(env, "LOGNAME")
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("exec: invalid environment variable name or value for %q", k)
		}
		env[k] = v
	}
	return &execRun{argv: argv, dir: dir, env: env, user: req.User}, nil
}

// envList is env as a sorted KEY=VALUE list.
func envList(env map[string]string) []string {
	l := make([]string, 0, len(env))
	for k, v := range env {
		l = append(l, k+"="+v)
	}
	slices.Sort(l)
	return l
}

// cannotRun is the result for a program that cannot be started: the
// shell's message and exit code (127 missing, 126 not executable).
func cannotRun(name string, err error) sandbox.ExecResult {
	msg := []byte(fmt.Sprintf("%s: %v\n", name, err))
	return sandbox.ExecResult{ExitCode: nsinit.NotFoundCode(err), Stderr: msg, OriginalStderr: int64(len(msg))}
}

// runNone runs the command directly on the host, in its own process
// group, which is killed on timeout and when the command exits.
func (s *Sandbox) runNone(ctx context.Context, run *execRun) (sandbox.ExecResult, error) {
	dir := filepath.Join(s.ws, filepath.FromSlash(run.dir))
	prog, err := nsinit.LookPath(run.argv[0], run.env["PATH"], dir)
	if err != nil {
		return cannotRun(run.argv[0], err), nil
	}
	return hostfs.RunProcess(ctx, hostfs.ProcessSpec{
		Argv: run.argv, Path: prog, Dir: dir, Env: run.env, Stdin: run.stdin,
		Timeout: run.timeout, OutputLimit: run.outputLimit,
		SysProcAttr: groupSysProcAttr(), KillGroupOnExit: true,
	})
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
