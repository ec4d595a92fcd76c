package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/coder/websocket"

	"github.com/agentctl/agentctl/sandbox"
)

// ptyReadLimit bounds one WebSocket message from a PTY session.
const ptyReadLimit = 4 << 20

// CreatePty creates a PTY session running the sandbox user's shell in
// cwd, on a terminal of rows x cols.
func (p *Process) CreatePty(ctx context.Context, id, cwd string, rows, cols int) error {
	in := map[string]any{"id": id, "cwd": cwd, "rows": rows, "cols": cols, "lazyStart": false}
	return p.s.client.doJSON(ctx, request{method: http.MethodPost, url: p.s.toolbox("/process/pty"), op: "create PTY session", sandbox: p.s.where()}, in, nil)
}

// DeletePty deletes a PTY session, killing its process.
func (p *Process) DeletePty(ctx context.Context, id string) error {
	err := p.s.client.doJSON(ctx, request{method: http.MethodDelete, url: p.s.toolbox("/process/pty/" + url.PathEscape(id)), op: "delete PTY session", sandbox: p.s.where(), idempotent: true}, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// ConnectPty opens a PTY session's WebSocket and waits for the daemon's
// "connected" control message.
func (p *Process) ConnectPty(ctx context.Context, id string) (*websocket.Conn, error) {
	h := http.Header{}
	p.s.client.setHeaders(h)
	c, resp, err := websocket.Dial(ctx, p.s.toolbox("/process/pty/"+url.PathEscape(id)+"/connect"), &websocket.DialOptions{HTTPClient: p.s.client.http, HTTPHeader: h})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("connect PTY session in %s: %s: %w", p.s.where(), resp.Status, err)
		}
		return nil, fmt.Errorf("connect PTY session in %s: %w", p.s.where(), err)
	}
	c.SetReadLimit(ptyReadLimit)
	typ, data, err := c.Read(ctx)
	if err != nil {
		c.CloseNow()
		return nil, fmt.Errorf("connect PTY session in %s: %w", p.s.where(), err)
	}
	var ctl struct {
		Type   string `json:"type"`
		Status string `json:"status"`
	}
	if typ != websocket.MessageText || json.Unmarshal(data, &ctl) != nil || ctl.Type != "control" || ctl.Status != "connected" {
		c.CloseNow()
		return nil, fmt.Errorf("connect PTY session in %s: the daemon did not confirm the connection (got %.100q)", p.s.where(), data)
	}
	return c, nil
}

// startPty starts a command on a terminal through a PTY session: the
// session's shell is told to exec a script (uploaded first, so the line
// typed is short) that runs the command from its directory with its
// environment; the terminal's output comes over the session's WebSocket,
// and its close frame carries the exit code. Deleting the session kills
// the command.
func (w *Workspace) startPty(ctx context.Context, req sandbox.ProcessRequest) (sandbox.Process, error) {
	inner, err := w.commandScript(sandbox.ExecRequest{Argv: req.Argv, Shell: req.Shell, Workdir: req.Workdir, Env: req.Env, User: req.User})
	if err != nil {
		return nil, err
	}
	script := w.p.tempDir + "/agentctl-pty-" + nonce() + ".sh"
	if err := w.s.FileSystem.UploadFile(ctx, []byte(inner), script); err != nil {
		return nil, err
	}
	cleanup := func() {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		_ = w.s.FileSystem.DeleteFile(cctx, script, false)
	}
	rows, cols := req.Rows, req.Cols
	if rows == 0 || cols == 0 {
		rows, cols = sandbox.DefaultTTYRows, sandbox.DefaultTTYCols
	}
	id := "agentctl-pty-" + nonce()
	if err := w.s.Process.CreatePty(ctx, id, w.root, rows, cols); err != nil {
		cleanup()
		return nil, err
	}
	deletePty := func() {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		_ = w.s.Process.DeletePty(cctx, id)
	}
	conn, err := w.s.Process.ConnectPty(ctx, id)
	if err != nil {
		deletePty()
		cleanup()
		return nil, err
	}
	if err := conn.Write(ctx, websocket.MessageBinary, []byte("exec /bin/sh "+sandbox.ShellQuote(script)+"\n")); err != nil {
		conn.CloseNow()
		deletePty()
		cleanup()
		return nil, fmt.Errorf("starting the command in the PTY session: %w", err)
	}
	return sandbox.StartStreamed(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		defer cleanup()
		defer conn.CloseNow()
		stop := context.AfterFunc(ctx, deletePty)
		defer stop()
		go func() {
			b := make([]byte, 32<<10)
			for {
				n, err := stdin.Read(b)
				if n > 0 {
					if conn.Write(context.Background(), websocket.MessageBinary, b[:n]) != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		for {
			_, data, err := conn.Read(context.Background())
			if err != nil {
				return ptyExit(ctx, err)
			}
			if _, err := stdout.Write(data); err != nil {
				deletePty()
				return -1, err
			}
		}
	}), nil
}

// ptyExit reads the exit code from the close frame that ended a PTY
// session's WebSocket.
func ptyExit(ctx context.Context, err error) (int, error) {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		var reason struct {
			ExitCode *int `json:"exitCode"`
		}
		if json.Unmarshal([]byte(ce.Reason), &reason) == nil && reason.ExitCode != nil {
			return *reason.ExitCode, nil
		}
		if ce.Code == websocket.StatusNormalClosure {
			return 0, nil
		}
	}
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	return -1, sandbox.MarkUnavailable(fmt.Errorf("the PTY session's connection ended without an exit code: %w", err))
}
