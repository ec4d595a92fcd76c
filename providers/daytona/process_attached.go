package daytona

import (
	"context"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/sandbox"
)

// maxInputChunk bounds one send-input request.
const maxInputChunk = 64 << 10

// StartProcess starts a command whose streams stay attached (an MCP
// server over stdio) as an asynchronous command in a session of its own:
// what is written to its stdin is sent with the toolbox's send-input
// call, its output is read by polling the command's logs (new output is
// passed on as it appears; the poll interval backs off to 250 ms while
// the command is quiet), and deleting the session kills it. The daemon
// has no way to close a command's stdin, so closing Stdin does not end
// the process; Kill does. With req.TTY it runs in a PTY session instead
// (startPty).
func (w *Workspace) StartProcess(ctx context.Context, req sandbox.ProcessRequest) (sandbox.Process, error) {
	var err error
	if req.Workdir, err = w.workdir(ctx, req.Workdir); err != nil {
		return nil, err
	}
	if req.TTY {
		return w.startPty(ctx, req)
	}
	inner, err := w.commandScript(sandbox.ExecRequest{Argv: req.Argv, Shell: req.Shell, Workdir: req.Workdir, Env: req.Env, User: req.User})
	if err != nil {
		return nil, err
	}
	cmd, cleanup, err := w.launcher(ctx, inner)
	if err != nil {
		return nil, err
	}
	sid := "agentctl-proc-" + nonce()
	if err := w.s.Process.CreateSession(ctx, sid); err != nil {
		cleanup()
		return nil, err
	}
	deleteSession := func() error {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		return w.s.Process.DeleteSession(cctx, sid)
	}
	r, err := w.s.Process.ExecuteSessionCommand(ctx, sid, cmd, true)
	if err != nil {
		deleteSession()
		cleanup()
		return nil, err
	}
	return sandbox.StartStreamed(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		defer cleanup()
		defer deleteSession()
		inputErr := make(chan error, 1)
		go func() { inputErr <- w.sendInput(ctx, sid, r.CmdID, stdin) }()
		return w.follow(ctx, sid, r.CmdID, stdout, stderr, inputErr)
	}), nil
}

// sendInput passes what is written to stdin on to the command, in
// chunks that end on a UTF-8 boundary (the request carries a string).
func (w *Workspace) sendInput(ctx context.Context, sid, cmdID string, stdin io.Reader) error {
	buf := make([]byte, maxInputChunk)
	var pending []byte
	for {
		n, err := stdin.Read(buf)
		pending = append(pending, buf[:n]...)
		cut := len(pending)
		for cut > 0 && !utf8.Valid(pending[:cut]) && len(pending)-cut < utf8.UTFMax {
			cut--
		}
		if cut > 0 {
			if serr := w.s.Process.SendInput(ctx, sid, cmdID, string(pending[:cut])); serr != nil {
				return fmt.Errorf("sending input: %w", serr)
			}
			pending = pending[cut:]
		}
		if err != nil {
			// EOF: nothing more to send (the daemon cannot close the
			// command's stdin).
			return nil
		}
	}
}

// follow polls the command's logs, writing new output as it appears,
// until the command exits (its exit code) or ctx ends (the command is
// killed by the caller deleting its session).
func (w *Workspace) follow(ctx context.Context, sid, cmdID string, stdout, stderr io.Writer, inputErr <-chan error) (int, error) {
	var sentOut, sentErr int
	pass := func(logs *SessionCommandLogs) error {
		if len(logs.Stdout) > sentOut {
			if _, err := io.WriteString(stdout, logs.Stdout[sentOut:]); err != nil {
				return err
			}
			sentOut = len(logs.Stdout)
		}
		if len(logs.Stderr) > sentErr {
			if _, err := io.WriteString(stderr, logs.Stderr[sentErr:]); err != nil {
				return err
			}
			sentErr = len(logs.Stderr)
		}
		return nil
	}
	interval := w.p.poll
	for {
		select {
		case err := <-inputErr:
			if err != nil {
				return -1, err
			}
			inputErr = nil
		default:
		}
		logs, err := w.s.Process.GetSessionCommandLogs(ctx, sid, cmdID)
		if err != nil {
			if ctx.Err() != nil {
				return -1, ctx.Err()
			}
			return -1, sandbox.MarkUnavailable(fmt.Errorf("reading the output of a process: %w", err))
		}
		before := sentOut + sentErr
		if err := pass(logs); err != nil {
			return -1, err
		}
		c, err := w.s.Process.GetSessionCommand(ctx, sid, cmdID)
		if err != nil {
			if ctx.Err() != nil {
				return -1, ctx.Err()
			}
			return -1, sandbox.MarkUnavailable(fmt.Errorf("reading the status of a process: %w", err))
		}
		if c.ExitCode != nil {
			// The last output, written before it exited.
			if logs, err := w.s.Process.GetSessionCommandLogs(ctx, sid, cmdID); err == nil {
				if err := pass(logs); err != nil {
					return -1, err
				}
			}
			return *c.ExitCode, nil
		}
		if sentOut+sentErr > before {
			interval = w.p.poll
		} else {
			interval = min(interval*2, 250*time.Millisecond)
		}
		if err := w.p.client.sleep(ctx, interval); err != nil {
			return -1, err
		}
	}
}
