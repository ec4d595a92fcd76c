package fakedaytona

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"
)

// ptySession is a toolbox PTY session: an interactive login shell on a
// pseudo-terminal, driven over a WebSocket as the daemon does: a text
// {"type":"control","status":"connected"} message first, the terminal's
// output as binary messages, every message received written to the
// terminal, and on exit a close frame (1000 for exit 0, 1011 otherwise)
// whose reason is {"exitCode": N, "exitReason": "..."}.
type ptySession struct {
	id   string
	cmd  *exec.Cmd
	ptmx *os.File
	done chan struct{}
	code int

	mu     sync.Mutex
	client *websocket.Conn
}

// createPty starts the session's shell (POST /process/pty).
func (s *Server) createPty(w http.ResponseWriter, b *fsb, body []byte) {
	var req struct {
		ID   string            `json:"id"`
		Cwd  string            `json:"cwd"`
		Envs map[string]string `json:"envs"`
		Rows uint16            `json:"rows"`
		Cols uint16            `json:"cols"`
	}
	json.Unmarshal(body, &req)
	s.mu.Lock()
	if b.ptys == nil {
		b.ptys = map[string]*ptySession{}
	}
	if req.ID == "" || b.ptys[req.ID] != nil {
		s.mu.Unlock()
		writeErr(w, 400, "a PTY session needs a new id")
		return
	}
	s.mu.Unlock()
	cmd := exec.Command("/bin/sh", "-i")
	cmd.Dir = s.Root
	if st, err := os.Stat(req.Cwd); err == nil && st.IsDir() && s.confine(b, req.Cwd) == nil {
		cmd.Dir = req.Cwd
	}
	cmd.Env = s.commandEnv(b, req.Envs)
	if req.Rows == 0 || req.Cols == 0 {
		req.Rows, req.Cols = 24, 80
	}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: req.Rows, Cols: req.Cols})
	if err != nil {
		writeErr(w, 400, err.Error())
		return
	}
	ps := &ptySession{id: req.ID, cmd: cmd, ptmx: ptmx, done: make(chan struct{})}
	s.mu.Lock()
	b.ptys[req.ID] = ps
	s.mu.Unlock()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 32<<10)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				ps.mu.Lock()
				c := ps.client
				ps.mu.Unlock()
				if c != nil {
					c.Write(context.Background(), websocket.MessageBinary, buf[:n])
				}
			}
			if err != nil {
				break
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		ps.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			ps.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				ps.code = 128 + int(ws.Signal())
			}
		}
		// The terminal's last output is still to be read when the shell
		// has exited: send it before the close frame, as the daemon does.
		// A process the shell left behind may keep the terminal open, so
		// the wait is bounded.
		select {
		case <-drained:
		case <-time.After(2 * time.Second):
		}
		ptmx.Close()
		close(ps.done)
		ps.mu.Lock()
		c := ps.client
		ps.mu.Unlock()
		if c != nil {
			ps.closeClient(c)
		}
		s.mu.Lock()
		delete(b.ptys, req.ID)
		s.mu.Unlock()
	}()
	writeJSON(w, 201, map[string]any{"sessionId": req.ID})
}

// closeClient closes the WebSocket as the daemon does when the shell ends.
func (ps *ptySession) closeClient(c *websocket.Conn) {
	status := websocket.StatusNormalClosure
	reason := map[string]any{"exitCode": ps.code}
	if ps.code != 0 {
		status = websocket.StatusInternalError
		reason["exitReason"] = "non-zero exit"
	}
	b, _ := json.Marshal(reason)
	c.Close(status, string(b))
}

// connectPty serves the session's WebSocket
// (GET /process/pty/{sessionId}/connect).
func (s *Server) connectPty(w http.ResponseWriter, r *http.Request, id string, params map[string]string) {
	s.mu.Lock()
	b := s.sandboxes[id]
	var ps *ptySession
	if b != nil {
		ps = b.ptys[params["sessionId"]]
	}
	s.mu.Unlock()
	if ps == nil {
		writeErr(w, 404, "PTY session not found")
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ps.mu.Lock()
	ps.client = c
	ps.mu.Unlock()
	c.Write(r.Context(), websocket.MessageText, []byte(`{"type":"control","status":"connected"}`))
	select {
	case <-ps.done:
		ps.closeClient(c)
		return
	default:
	}
	for {
		_, data, err := c.Read(context.Background())
		if err != nil {
			return
		}
		if _, err := ps.ptmx.Write(data); err != nil && !errors.Is(err, io.ErrClosedPipe) {
			return
		}
	}
}

// deletePty kills the session's shell (DELETE /process/pty/{sessionId}).
func (s *Server) deletePty(w http.ResponseWriter, b *fsb, params map[string]string) {
	s.mu.Lock()
	ps := b.ptys[params["sessionId"]]
	s.mu.Unlock()
	if ps == nil {
		writeErr(w, 404, "PTY session not found")
		return
	}
	killPty(ps)
	<-ps.done
	writeJSON(w, 200, map[string]any{})
}

func killPty(ps *ptySession) {
	if ps.cmd.Process != nil {
		ps.cmd.Process.Kill()
	}
}
