package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"crypto/rand"
	"encoding/hex"

	"connectrpc.com/connect"

	"github.com/agentctl/agentctl/providers/e2b/internal/envd/process"
	"github.com/agentctl/agentctl/sandbox"
)

// inputChunk bounds one SendInput request.
const inputChunk = 64 << 10

// command is what a request runs through envd.
type command struct {
	// marker is the value of sandbox.ExecMarkerEnv in the command's
	// environment: it marks every process of its tree, so a kill finds
	// them all (those that left its process group too).
	marker string
	argv   []string
	cwd    string
	env    map[string]string
	user   string
	tty    bool
	rows   int
	cols   int
}

func (w *Workspace) command(ctx context.Context, argv []string, workdir string, env map[string]string, user string) (command, error) {
	if user != "" {
		if _, ok := w.spec.Accounts.User(user); !ok {
			return command{}, fmt.Errorf("exec: %w", &sandbox.UnknownUserError{Name: user})
		}
	}
	for k := range env {
		if !sandbox.ValidEnvName(k) {
			return command{}, fmt.Errorf("environment variable name %q is not valid", k)
		}
	}
	cwd := w.root
	if workdir != "" {
		// Resolved in the sandbox: a symlink out of the workspace is
		// refused.
		r, err := w.resolve(ctx, "exec in", workdir, true)
		if err != nil {
			return command{}, err
		}
		if r.Kind != 'D' {
			return command{}, fmt.Errorf("exec in %q: not a directory", workdir)
		}
		cwd = r.Follow
	}
	return command{marker: nonce(), argv: argv, cwd: cwd, env: env, user: user}, nil
}

// started is a process envd runs.
type started struct {
	w      *Workspace
	c      command
	pid    uint32
	stream *connect.ServerStreamForClient[process.StartResponse]
	cancel context.CancelFunc
	// done is closed when wait returns.
	done chan struct{}
}

// start starts c; the process's stream lives until ctx ends or the
// returned process's cancel is called.
func (w *Workspace) start(ctx context.Context, c command, stdin bool) (*started, error) {
	if err := w.keepAlive(ctx); err != nil {
		return nil, err
	}
	env := make(map[string]string, len(c.env)+1)
	for k, v := range c.env {
		env[k] = v
	}
	if c.marker != "" {
		env[sandbox.ExecMarkerEnv] = c.marker
	}
	sctx, cancel := context.WithCancel(AsUser(ctx, c.user))
	stream, pid, err := w.envd.Start(sctx, StartParams{Argv: c.argv, Cwd: c.cwd, Env: env, Stdin: stdin, Rows: c.rows, Cols: c.cols})
	if err != nil {
		cancel()
		return nil, unavailable(err)
	}
	return &started{w: w, c: c, pid: pid, stream: stream, cancel: cancel, done: make(chan struct{})}, nil
}

// killTree kills every process of the command: those carrying its
// marker (sandbox.KillTreeScript, run as the command's user), and the
// process envd started, from a context of its own.
func (p *started) killTree(ctx context.Context) error {
	cctx, cancel := sandbox.CleanupContext(ctx)
	defer cancel()
	cctx = AsUser(cctx, p.c.user)
	var errs []error
	if p.c.marker != "" {
		if s, _, err := p.w.envd.Start(cctx, StartParams{Argv: []string{"/bin/sh", "-c", sandbox.KillTreeScript, "sh", p.c.marker}}); err != nil {
			errs = append(errs, err)
		} else {
			code := -1
			for s.Receive() {
				if end := s.Msg().GetEvent().GetEnd(); end != nil {
					code = exitCode(end)
				}
			}
			s.Close()
			if code != 0 {
				errs = append(errs, fmt.Errorf("some processes of the command survived the kill (exit %d)", code))
			}
		}
	}
	if err := p.w.envd.Kill(cctx, p.pid); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// feed passes what stdin yields to the process, then closes its input
// (on a terminal, EOF is Ctrl-D).
func (p *started) feed(ctx context.Context, stdin io.Reader) error {
	ctx = AsUser(ctx, p.c.user)
	buf := make([]byte, inputChunk)
	for {
		n, err := stdin.Read(buf)
		if n > 0 {
			if serr := p.w.envd.SendStdin(ctx, p.pid, buf[:n], p.c.tty); serr != nil {
				return fmt.Errorf("sending input: %w", serr)
			}
		}
		if err == io.EOF {
			if p.c.tty {
				return p.w.envd.SendStdin(ctx, p.pid, []byte{4}, true)
			}
			return p.w.envd.CloseStdin(ctx, p.pid)
		}
		if err != nil {
			return fmt.Errorf("reading input: %w", err)
		}
	}
}

// wait copies the process's output until its end event and returns its
// exit code.
func (p *started) wait(stdout, stderr io.Writer) (int, error) {
	defer close(p.done)
	defer p.stream.Close()
	for p.stream.Receive() {
		ev := p.stream.Msg().GetEvent()
		if d := ev.GetData(); d != nil {
			var err error
			switch {
			case d.GetStdout() != nil:
				_, err = stdout.Write(d.GetStdout())
			case d.GetStderr() != nil:
				_, err = stderr.Write(d.GetStderr())
			case d.GetPty() != nil:
				_, err = stdout.Write(d.GetPty())
			}
			if err != nil {
				return -1, err
			}
			continue
		}
		if end := ev.GetEnd(); end != nil {
			if end.Error != nil && !end.GetExited() && end.GetStatus() == "" {
				return -1, fmt.Errorf("process (%s): %s", p.w.s.where(), end.GetError())
			}
			return exitCode(end), nil
		}
	}
	err := p.stream.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return -1, sandbox.MarkUnavailable(fmt.Errorf("the process's stream ended without its exit code: %w", p.w.envd.rpcErr("wait for process", err)))
}

// Exec implements sandbox.Sandbox: the command runs through envd's
// process service with its output streamed back; a timeout kills its
// process group and reports TimedOut with exit code -1.
func (w *Workspace) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	argv, err := req.Command()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	c, err := w.command(ctx, argv, req.Workdir, req.Env, req.User)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	begin := time.Now()
	p, err := w.start(ctx, c, req.Stdin != nil)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	defer p.cancel()
	feedErr := make(chan error, 1)
	if req.Stdin != nil {
		go func() { feedErr <- p.feed(ctx, req.Stdin) }()
	} else {
		feedErr <- nil
	}
	var timer *time.Timer
	killed := make(chan error, 1)
	if req.Timeout > 0 {
		timer = time.AfterFunc(req.Timeout, func() { killed <- p.killTree(ctx) })
	}
	stop := context.AfterFunc(ctx, func() { p.killTree(ctx) })
	defer stop()
	o, e := sandbox.NewHeadTail(req.OutputLimit), sandbox.NewHeadTail(req.OutputLimit)
	code, werr := p.wait(o, e)
	if ctx.Err() != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec: %w", ctx.Err())
	}
	if timer != nil && !timer.Stop() {
		// Timed out: the kill ended the process.
		if kerr := <-killed; kerr != nil {
			return sandbox.ExecResult{}, fmt.Errorf("the command timed out but could not be killed: %w", kerr)
		}
		return sandbox.CapturedResult(o, e, -1, time.Since(begin), true), nil
	}
	if werr != nil {
		return sandbox.ExecResult{}, werr
	}
	if ferr := <-feedErr; ferr != nil && code == 0 {
		return sandbox.ExecResult{}, ferr
	}
	return sandbox.CapturedResult(o, e, code, time.Since(begin), false), nil
}

// StartProcess implements sandbox.ProcessStarter: the process's streams
// stay attached (stdin through SendInput, closed with CloseStdin); with
// req.TTY it runs on a terminal of envd's (its output on Stdout).
func (w *Workspace) StartProcess(ctx context.Context, req sandbox.ProcessRequest) (sandbox.Process, error) {
	argv, err := req.Command()
	if err != nil {
		return nil, err
	}
	c, err := w.command(ctx, argv, req.Workdir, req.Env, req.User)
	if err != nil {
		return nil, err
	}
	if req.TTY {
		c.tty, c.rows, c.cols = true, req.Rows, req.Cols
		if c.rows == 0 || c.cols == 0 {
			c.rows, c.cols = sandbox.DefaultTTYRows, sandbox.DefaultTTYCols
		}
		// A terminal's shell should know what it talks to.
		env := map[string]string{"TERM": "xterm-256color"}
		for k, v := range c.env {
			env[k] = v
		}
		c.env = env
	}
	p, err := w.start(context.WithoutCancel(ctx), c, true)
	if err != nil {
		return nil, err
	}
	return sandbox.StartStreamed(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		defer p.cancel()
		stop := context.AfterFunc(ctx, func() { p.killTree(ctx) })
		defer stop()
		inputErr := make(chan error, 1)
		go func() {
			err := p.feed(ctx, stdin)
			select {
			case <-p.done:
				err = nil // the process exited: its input is closed
			default:
			}
			if err != nil && ctx.Err() == nil {
				// Input that cannot be delivered ends the process: the
				// writer would block for ever otherwise.
				p.killTree(ctx)
			}
			inputErr <- err
		}()
		code, err := p.wait(stdout, stderr)
		select {
		case ierr := <-inputErr:
			if ierr != nil && ctx.Err() == nil && err == nil {
				return -1, ierr
			}
		default:
		}
		return code, err
	}), nil
}

// run executes a helper script and returns its stdout, exit code and
// stderr.
func (w *Workspace) run(ctx context.Context, op, script string) (string, int, string, error) {
	res, err := w.Exec(ctx, sandbox.ExecRequest{Shell: script, Timeout: 5 * time.Minute, OutputLimit: 64 << 20})
	if err != nil {
		return "", 0, "", fmt.Errorf("%s: %w", op, err)
	}
	if res.TimedOut {
		return "", 0, "", fmt.Errorf("%s: timed out", op)
	}
	return string(res.Stdout), res.ExitCode, string(bytes.TrimSpace(res.Stderr)), nil
}

// createAccounts creates the manifest's users and groups, as root: envd
// runs a request as any user of the sandbox, named in the request.
func (w *Workspace) createAccounts(ctx context.Context) error {
	a := w.spec.Accounts
	if a.Empty() {
		return nil
	}
	argv := append([]string{"/bin/sh", "-c", sandbox.AccountsScript, "sh"}, sandbox.AccountsArgs(a, w.root)...)
	c := command{argv: argv, user: "root"}
	p, err := w.start(ctx, c, false)
	if err != nil {
		return fmt.Errorf("creating the manifest's users and groups: %w", err)
	}
	defer p.cancel()
	var out, errb bytes.Buffer
	code, err := p.wait(&out, &errb)
	if err != nil {
		return fmt.Errorf("creating the manifest's users and groups: %w", err)
	}
	if code != 0 {
		return sandbox.AccountsError("template "+w.st.template(), code, errb.String())
	}
	return nil
}

func nonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
