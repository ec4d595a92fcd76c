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

// Bounds on stopping a command that timed out or whose context ended
// (docs/docker-provider.md, "Exec"). A fork bomb starves every process in
// the container of CPU and pids, a kill helper exec'd into it included:
// the helper gets killTimeout, and then the container is restarted from
// outside, through the Engine API.
const (
	// killTimeout bounds the kill helper, all its attempts together.
	killTimeout = 5 * time.Second
	// killGrace is how long output may keep flowing after the process
	// tree was killed before the stream is cut.
	killGrace = 2 * time.Second
	// inspectTimeout bounds waiting for the daemon to record the exit of
	// a killed command.
	inspectTimeout = 5 * time.Second
	// restartTimeout bounds restarting the container.
	restartTimeout = 20 * time.Second
)

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
// (137 for SIGKILL). When the tree could not be killed from inside the
// container in time, the container is restarted and stderr ends with a
// line that says so.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	sp, err := s.prepare(ctx, req)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	stdout := sandbox.NewHeadTail(req.OutputLimit)
	stderr := sandbox.NewHeadTail(req.OutputLimit)
	sp.stdin, sp.stdout, sp.stderr, sp.timeout = req.Stdin, stdout, stderr, req.Timeout
	start := time.Now()
	out, err := s.execStream(ctx, sp)
	if out.restarted != "" {
		_, _ = io.WriteString(stderr, "\nagentctl: "+out.restarted+"\n")
	}
	res := sandbox.CapturedResult(stdout, stderr, out.code, time.Since(start), out.timedOut)
	startFailure(&res)
	return res, err
}

// startFailure turns the daemon's report of a program it could not start
// (exit 126, the runtime's message on stdout) into what a shell reports:
// the message on stderr, and exit 127 for a program that does not exist.
func startFailure(res *sandbox.ExecResult) {
	msg := res.Stdout
	if res.ExitCode != 126 || !bytes.HasPrefix(msg, []byte("OCI runtime exec failed")) || res.Truncated {
		return
	}
	if bytes.Contains(msg, []byte("executable file not found")) || bytes.Contains(msg, []byte("no such file or directory")) {
		res.ExitCode = 127
	}
	before := len(res.Stderr)
	res.Stderr = append(append(res.Stderr, bytes.TrimRight(msg, "\r\n")...), '\n')
	res.Stdout = nil
	res.OriginalStdout, res.OriginalStderr = 0, res.OriginalStderr+int64(len(res.Stderr)-before)
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
		out, err := s.execStream(ctx, sp)
		return out.code, err
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

// execOutcome is how an exec ended.
type execOutcome struct {
	code     int
	timedOut bool
	// restarted says why the container was restarted to stop the
	// command; "" when it was not.
	restarted string
}

// attached is a started exec whose output is being copied.
type attached struct {
	id  string
	att client.ExecAttachResult
	// done receives the end of the output copy, once.
	done chan error
}

// finish waits for ex's output to end, for grace at most: then it cuts
// the stream.
func (ex *attached) finish(grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-ex.done:
	case <-t.C:
		ex.att.Close()
		<-ex.done
	}
}

// start creates an exec of sp, attaches to it and copies its streams.
func (s *Sandbox) start(ctx context.Context, sp execSpec) (*attached, error) {
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
			return nil, sandbox.MarkUnavailable(fmt.Errorf("exec %s: container %s is stopped (or paused or restarting); start the sandbox first (the next apply restarts stopped sandboxes): %w", sp.argv[0], s.d.Name, err))
		}
		return nil, s.wrap(ctx, "exec "+sp.argv[0], err)
	}
	att, err := s.p.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: sp.tty, ConsoleSize: sp.size})
	if err != nil {
		return nil, s.wrap(ctx, "exec "+sp.argv[0], err)
	}
	if sp.tty {
		// Daemons before API 1.42 ignore the size given at creation:
		// resize the terminal once the exec runs. A command that has
		// already ended has no terminal left to size, so an error here
		// changes nothing the command sees.
		_, _ = s.p.cli.ExecResize(ctx, created.ID, client.ExecResizeOptions{Height: sp.size.Height, Width: sp.size.Width})
	}
	ex := &attached{id: created.ID, att: att, done: make(chan error, 1)}
	go func() {
		if sp.tty {
			// A terminal's output is one raw stream.
			_, err := io.Copy(sp.stdout, att.Reader)
			ex.done <- err
			return
		}
		_, err := stdcopy.StdCopy(sp.stdout, sp.stderr, att.Reader)
		ex.done <- err
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
	return ex, nil
}

// execStream runs one exec to completion. On timeout, or when ctx ends,
// it stops the exec's process tree (stopTree), which is bounded.
func (s *Sandbox) execStream(ctx context.Context, sp execSpec) (execOutcome, error) {
	ex, err := s.start(ctx, sp)
	if err != nil {
		return execOutcome{code: -1}, err
	}
	defer ex.att.Close()
	var timer <-chan time.Time
	if sp.timeout > 0 {
		t := time.NewTimer(sp.timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case err := <-ex.done:
		if err != nil {
			return execOutcome{code: -1}, s.wrap(ctx, "exec "+sp.argv[0]+": reading output", err)
		}
		code, err := s.exitCode(ctx, ex.id, sp.argv[0])
		return execOutcome{code: code}, err
	case <-timer:
		out, err := s.stopTree(ctx, sp, ex)
		out.timedOut = true
		return out, err
	case <-ctx.Done():
		out, err := s.stopTree(ctx, sp, ex)
		cerr := fmt.Errorf("exec %s: %w", sp.argv[0], ctx.Err())
		switch {
		case err != nil:
			cerr = fmt.Errorf("exec %s: %w; %w", sp.argv[0], ctx.Err(), err)
		case out.restarted != "":
			cerr = fmt.Errorf("exec %s: %w; %s", sp.argv[0], ctx.Err(), out.restarted)
		}
		return execOutcome{code: -1}, cerr
	}
}

// exitCode waits for the daemon to record the exit of the exec id (its
// stream ends when the process's stdio closes; the exit may be recorded
// a moment later) and returns its exit code.
func (s *Sandbox) exitCode(ctx context.Context, id, prog string) (int, error) {
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		ins, err := s.p.cli.ExecInspect(ctx, id, client.ExecInspectOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return -1, fmt.Errorf("exec %s: %w", prog, ctx.Err())
			}
			return -1, s.wrap(ctx, "exec inspect", err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("exec %s: %w", prog, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// stopTree stops the process tree of ex, the exec of sp, within bounded
// time whether or not ctx has ended: the kill helper gets killTimeout;
// when it cannot finish (a fork bomb starves it), the container is
// restarted from outside. Then the output may drain for killGrace and the
// daemon gets inspectTimeout to record the exit. The error is the
// container's: gone, stopped, or failing to restart.
func (s *Sandbox) stopTree(ctx context.Context, sp execSpec, ex *attached) (execOutcome, error) {
	cctx := context.WithoutCancel(ctx)
	out := execOutcome{code: -1}
	var err error
	if kerr := s.killMarked(cctx, sp); kerr != nil {
		if errors.Is(kerr, sandbox.ErrNotFound) || errors.Is(kerr, sandbox.ErrUnavailable) {
			// The container is gone or stopped: so are its processes.
			err = kerr
		} else {
			out.restarted, err = s.restartToKill(cctx, sp, kerr)
		}
	}
	ex.finish(killGrace)
	if out.restarted != "" {
		// Restarting killed the command, as SIGKILL does.
		out.code = 137
	}
	if out.restarted != "" || err != nil {
		return out, err
	}
	ictx, cancel := context.WithTimeout(cctx, inspectTimeout)
	defer cancel()
	if code, ierr := s.exitCode(ictx, ex.id, sp.argv[0]); ierr == nil {
		out.code = code
	}
	return out, nil
}

// killMarked runs the kill helper (sandbox.KillTreeScript) as sp's user
// until it reports no process left carrying sp's marker, for killTimeout
// at most: it fails to start while a fork bomb holds every pid the
// container may use, and is starved of CPU by one that spins.
func (s *Sandbox) killMarked(ctx context.Context, sp execSpec) error {
	kctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	argv := []string{"/bin/sh", "-c", sandbox.KillTreeScript, "sh", sp.marker}
	for {
		code, stderr, err := s.helper(kctx, sp.user, argv)
		if err == nil && code == 0 {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("the kill helper exited %d: %s", code, strings.TrimSpace(stderr))
		}
		if errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrUnavailable) {
			return err
		}
		select {
		case <-kctx.Done():
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("the kill helper did not finish within %v", killTimeout)
			}
			return fmt.Errorf("the kill helper did not succeed within %v: %w", killTimeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// helper runs argv as user to completion, or until ctx ends, and returns
// its exit code and stderr. It never kills anything: a helper that ctx
// ends is left to finish on its own.
func (s *Sandbox) helper(ctx context.Context, user string, argv []string) (int, string, error) {
	var stdout, stderr bytes.Buffer
	ex, err := s.start(ctx, execSpec{user: user, argv: argv, stdout: &stdout, stderr: &stderr})
	if err != nil {
		return -1, "", err
	}
	defer ex.att.Close()
	select {
	case err := <-ex.done:
		if err != nil {
			return -1, "", s.wrap(ctx, "exec "+argv[0]+": reading output", err)
		}
	case <-ctx.Done():
		ex.att.Close()
		<-ex.done
		return -1, "", ctx.Err()
	}
	code, err := s.exitCode(ctx, ex.id, argv[0])
	return code, stderr.String(), err
}

// restartToKill restarts the container, which kills every process in it
// from outside, after the kill helper failed with cause. It returns the
// note that says so, or, when the restart failed, an error marked
// unavailable.
func (s *Sandbox) restartToKill(ctx context.Context, sp execSpec, cause error) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	why := fmt.Sprintf("the processes of %s could not be killed from inside container %s (%v), as happens when a fork bomb holds its pids and CPU", sp.argv[0], s.d.Name, cause)
	zero := 0
	if _, err := s.p.cli.ContainerRestart(rctx, s.id, client.ContainerRestartOptions{Timeout: &zero}); err != nil {
		return "", sandbox.MarkUnavailable(fmt.Errorf("%s, and restarting the container failed: %w; the next apply starts it again", why, s.wrap(rctx, "restart", err)))
	}
	note := why + ", so the container was restarted, which ended every process in it"
	// A restart may publish the ports on other host ports.
	if err := s.refreshURLs(rctx); err != nil {
		note += fmt.Sprintf(" (reading its port URLs afterwards failed: %v)", err)
	}
	return note, nil
}

// run executes an internal helper command as user and collects its output.
func (s *Sandbox) run(ctx context.Context, user string, argv []string, stdin io.Reader) ([]byte, []byte, int, error) {
	var out, errOut bytes.Buffer
	res, err := s.execStream(ctx, execSpec{
		user: user, argv: argv, stdin: stdin, stdout: &out, stderr: &errOut,
		env: []string{MarkerEnv + "=" + randHex(16)},
	})
	return out.Bytes(), errOut.Bytes(), res.code, err
}
