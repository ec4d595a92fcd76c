package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
)

// MarkerEnv is the environment variable every command carries
// (sandbox.ExecMarkerEnv).
const MarkerEnv = sandbox.ExecMarkerEnv

// killGrace is how long output may keep flowing after the process tree
// was killed before the stream is cut.
const killGrace = 5 * time.Second

type execSpec struct {
	user    string
	argv    []string
	env     []string
	workdir string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	timeout time.Duration
	marker  string
	// tty runs the exec on a terminal of size; its output comes raw on
	// stdout.
	tty  bool
	size client.ConsoleSize
}

// Exec runs a command in the container: argv directly, or Shell with
// /bin/sh -c, in Workdir beneath the workspace root, as the sandbox user,
// with separate stdout and stderr kept head+tail within OutputLimit. On
// timeout every process of the command's tree is killed and TimedOut is
// set; ExitCode is then what the daemon reports for the killed command
// (137 for SIGKILL).
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	sp, err := s.prepare(ctx, req)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	stdout := sandbox.NewHeadTail(req.OutputLimit)
	stderr := sandbox.NewHeadTail(req.OutputLimit)
	sp.stdin, sp.stdout, sp.stderr, sp.timeout = req.Stdin, stdout, stderr, req.Timeout
	start := time.Now()
	code, timedOut, err := s.execStream(ctx, sp)
	return sandbox.CapturedResult(stdout, stderr, code, time.Since(start), timedOut), err
}

// StartProcess starts a command whose streams stay attached (an MCP
// server over stdio); cancelling ctx or Kill kills its process tree as a
// timeout does.
func (s *Sandbox) StartProcess(ctx context.Context, req sandbox.ProcessRequest) (sandbox.Process, error) {
	sp, err := s.prepare(ctx, sandbox.ExecRequest{Argv: req.Argv, Shell: req.Shell, Workdir: req.Workdir, Env: req.Env, User: req.User})
	if err != nil {
		return nil, err
	}
	return sandbox.StartStreamed(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		sp := sp
		sp.stdin, sp.stdout, sp.stderr = stdin, stdout, stderr
		if req.TTY {
			sp.tty, sp.size = true, client.ConsoleSize{Height: uint(req.Rows), Width: uint(req.Cols)}
			if req.Rows == 0 || req.Cols == 0 {
				sp.size = client.ConsoleSize{Height: sandbox.DefaultTTYRows, Width: sandbox.DefaultTTYCols}
			}
		}
		code, _, err := s.execStream(ctx, sp)
		return code, err
	}), nil
}

// prepare resolves req's workdir and environment into an exec.
func (s *Sandbox) prepare(ctx context.Context, req sandbox.ExecRequest) (execSpec, error) {
	argv, err := req.Command()
	if err != nil {
		return execSpec{}, err
	}
	user := s.d.User
	if req.User != "" {
		// By name: the daemon takes its uid, primary group and
		// supplementary groups from the container's /etc/passwd and
		// /etc/group, where createAccounts put them.
		if _, ok := s.accounts.User(req.User); !ok {
			return execSpec{}, fmt.Errorf("exec: %w", &sandbox.UnknownUserError{Name: req.User})
		}
		user = req.User
	}
	comps, err := s.relPath(req.Workdir)
	if err != nil {
		return execSpec{}, fmt.Errorf("exec workdir: %w", err)
	}
	wd := s.d.Root
	if len(comps) > 0 {
		r, err := s.resolve(ctx, req.Workdir, comps, true)
		if err != nil {
			return execSpec{}, fmt.Errorf("exec workdir: %w", err)
		}
		if !r.exists || !r.stat.Mode.IsDir() {
			return execSpec{}, fmt.Errorf("exec: workdir %q is not a directory in the workspace", req.Workdir)
		}
		wd = r.path
	}
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(req.Env[k], 0) {
			return execSpec{}, fmt.Errorf("exec: invalid environment variable %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	marker := randHex(16)
	env := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		env = append(env, k+"="+req.Env[k])
	}
	env = append(env, MarkerEnv+"="+marker)
	return execSpec{user: user, argv: argv, env: env, workdir: wd, marker: marker}, nil
}

// execStream runs one exec to completion and returns its exit code.
func (s *Sandbox) execStream(ctx context.Context, sp execSpec) (int, bool, error) {
	created, err := s.p.cli.ExecCreate(ctx, s.id, client.ExecCreateOptions{
		User:         sp.user,
		AttachStdin:  sp.stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Env:          sp.env,
		WorkingDir:   sp.workdir,
		Cmd:          sp.argv,
		TTY:          sp.tty,
		ConsoleSize:  sp.size,
	})
	if err != nil {
		// The daemon answers Conflict for a container that is stopped,
		// paused or restarting.
		if cerrdefs.IsConflict(err) {
			return -1, false, sandbox.MarkUnavailable(fmt.Errorf("exec %s: container %s is stopped (or paused or restarting); start the sandbox first (the next apply restarts stopped sandboxes): %w", sp.argv[0], s.d.Name, err))
		}
		return -1, false, s.wrap(ctx, "exec "+sp.argv[0], err)
	}
	att, err := s.p.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: sp.tty, ConsoleSize: sp.size})
	if err != nil {
		return -1, false, s.wrap(ctx, "exec "+sp.argv[0], err)
	}
	defer att.Close()
	done := make(chan error, 1)
	go func() {
		if sp.tty {
			// A terminal's output is one raw stream.
			_, err := io.Copy(sp.stdout, att.Reader)
			done <- err
			return
		}
		_, err := stdcopy.StdCopy(sp.stdout, sp.stderr, att.Reader)
		done <- err
	}()
	if sp.stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, sp.stdin)
			if !sp.tty {
				// EOF for a pipe; a terminal stays open until the
				// command ends (closing it early loses its last output).
				_ = att.CloseWrite()
			}
		}()
	}
	var timer <-chan time.Time
	if sp.timeout > 0 {
		t := time.NewTimer(sp.timeout)
		defer t.Stop()
		timer = t.C
	}
	timedOut := false
	var streamErr error
	select {
	case streamErr = <-done:
	case <-timer:
		timedOut = true
		streamErr = s.stopTree(ctx, sp, att.Close, done)
	case <-ctx.Done():
		_ = s.stopTree(ctx, sp, att.Close, done)
		return -1, false, fmt.Errorf("exec %s: %w", sp.argv[0], ctx.Err())
	}
	if streamErr != nil && !timedOut {
		return -1, false, s.wrap(ctx, "exec "+sp.argv[0]+": reading output", streamErr)
	}
	// The stream ends when the process's stdio closes; the daemon may
	// record the exit a moment later.
	ictx := ctx
	if timedOut {
		var cancel context.CancelFunc
		ictx, cancel = sandbox.CleanupContext(ctx)
		defer cancel()
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		ins, err := s.p.cli.ExecInspect(ictx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return -1, timedOut, s.wrap(ictx, "exec inspect", err)
		}
		if !ins.Running {
			return ins.ExitCode, timedOut, nil
		}
		select {
		case <-ictx.Done():
			if timedOut {
				return -1, true, nil
			}
			return -1, false, fmt.Errorf("exec %s: %w", sp.argv[0], ictx.Err())
		case <-time.After(delay):
		}
	}
}

// stopTree kills the exec's process tree, then waits a little for the
// output stream to drain before cutting it.
func (s *Sandbox) stopTree(ctx context.Context, sp execSpec, closeConn func(), done <-chan error) error {
	kctx, cancel := sandbox.CleanupContext(ctx)
	defer cancel()
	var kerr error
	// The killer itself may fail to start while a fork bomb holds every
	// pid the container may use: retry until it gets one.
	for attempt := 0; attempt < 20; attempt++ {
		var out, errOut bytes.Buffer
		var code int
		code, _, kerr = s.execStream(kctx, execSpec{
			user: sp.user, argv: []string{"/bin/sh", "-c", sandbox.KillTreeScript, "sh", sp.marker},
			stdout: &out, stderr: &errOut,
		})
		if kerr == nil && code == 0 {
			break
		}
		if kerr == nil {
			kerr = fmt.Errorf("kill helper exited %d: %s", code, strings.TrimSpace(errOut.String()))
		}
		if errors.Is(kerr, sandbox.ErrNotFound) || kctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-done:
		return err
	case <-time.After(killGrace):
		closeConn()
		<-done
		if kerr != nil {
			return fmt.Errorf("exec timed out and killing its processes failed: %w", kerr)
		}
		return nil
	}
}

// run executes an internal helper command as user and collects its output.
func (s *Sandbox) run(ctx context.Context, user string, argv []string, stdin io.Reader) ([]byte, []byte, int, error) {
	var out, errOut bytes.Buffer
	code, _, err := s.execStream(ctx, execSpec{
		user: user, argv: argv, stdin: stdin, stdout: &out, stderr: &errOut,
		env: []string{MarkerEnv + "=" + randHex(16)},
	})
	return out.Bytes(), errOut.Bytes(), code, err
}
