package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Process runs commands through a sandbox's toolbox, as the SDK's
// ProcessService.
type Process struct{ s *Sandbox }

// ExecuteResponse is the answer of process/execute: the combined output
// and the exit code.
type ExecuteResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

type executeRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Envs    map[string]string `json:"envs,omitempty"`
	Timeout int               `json:"timeout,omitempty"`
}

// ExecuteCommand runs command (split into argv by the daemon, which
// honours single and double quotes but no backslash escapes, and runs it
// without a shell) and returns its combined output. timeout is rounded up
// to whole seconds; the daemon answers 408 when it expires.
func (p *Process) ExecuteCommand(ctx context.Context, command, cwd string, env map[string]string, timeout time.Duration) (*ExecuteResponse, error) {
	in := executeRequest{Command: command, Cwd: cwd, Envs: env}
	if timeout > 0 {
		in.Timeout = int(math.Ceil(timeout.Seconds()))
	}
	var out ExecuteResponse
	err := p.s.client.doJSON(ctx, request{method: http.MethodPost, url: p.s.toolbox("/process/execute"), op: "execute command", sandbox: p.s.where()}, in, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateSession creates a shell session.
func (p *Process) CreateSession(ctx context.Context, sessionID string) error {
	return p.s.client.doJSON(ctx, request{method: http.MethodPost, url: p.s.toolbox("/process/session"), op: "create session", sandbox: p.s.where()},
		map[string]string{"sessionId": sessionID}, nil)
}

// DeleteSession deletes a session, killing whatever still runs in it.
func (p *Process) DeleteSession(ctx context.Context, sessionID string) error {
	err := p.s.client.doJSON(ctx, request{method: http.MethodDelete, url: p.s.toolbox("/process/session/" + url.PathEscape(sessionID)), op: "delete session", sandbox: p.s.where(), idempotent: true}, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// SessionExecuteResponse is the answer of a session exec. ExitCode is nil
// while an asynchronous command runs.
type SessionExecuteResponse struct {
	CmdID    string `json:"cmdId"`
	ExitCode *int   `json:"exitCode"`
	Output   string `json:"output"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// ExecuteSessionCommand runs command in the session's shell. With
// runAsync it returns at once with the command id.
func (p *Process) ExecuteSessionCommand(ctx context.Context, sessionID, command string, runAsync bool) (*SessionExecuteResponse, error) {
	in := map[string]any{"command": command, "runAsync": runAsync, "async": runAsync}
	var out SessionExecuteResponse
	err := p.s.client.doJSON(ctx, request{method: http.MethodPost, url: p.s.toolbox("/process/session/" + url.PathEscape(sessionID) + "/exec"), op: "execute session command", sandbox: p.s.where()}, in, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SendInput writes data to the standard input of a command running in a
// session.
func (p *Process) SendInput(ctx context.Context, sessionID, commandID, data string) error {
	return p.s.client.doJSON(ctx, request{method: http.MethodPost, url: p.s.toolbox("/process/session/" + url.PathEscape(sessionID) + "/command/" + url.PathEscape(commandID) + "/input"), op: "send input", sandbox: p.s.where()},
		map[string]string{"data": data}, nil)
}

// Command is a session command's status; ExitCode is nil while it runs.
type Command struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode"`
}

// GetSessionCommand returns a session command's status.
func (p *Process) GetSessionCommand(ctx context.Context, sessionID, commandID string) (*Command, error) {
	var out Command
	err := p.s.client.doJSON(ctx, request{method: http.MethodGet, url: p.s.toolbox("/process/session/" + url.PathEscape(sessionID) + "/command/" + url.PathEscape(commandID)), op: "get session command", sandbox: p.s.where(), idempotent: true}, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SessionCommandLogs is a session command's output so far.
type SessionCommandLogs struct {
	Output string `json:"output"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// GetSessionCommandLogs returns a command's logs. Daemons that honour the
// SDK version header answer JSON with the streams separated; older ones
// answer text with 3-byte stream markers, which are demultiplexed here.
func (p *Process) GetSessionCommandLogs(ctx context.Context, sessionID, commandID string) (*SessionCommandLogs, error) {
	resp, err := p.s.client.do(ctx, request{method: http.MethodGet, url: p.s.toolbox("/process/session/" + url.PathEscape(sessionID) + "/command/" + url.PathEscape(commandID) + "/logs"), op: "get session command logs", sandbox: p.s.where(), idempotent: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	var out SessionCommandLogs
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && json.Unmarshal(buf.Bytes(), &out) == nil {
		return &out, nil
	}
	out.Output = buf.String()
	out.Stdout, out.Stderr = demux(buf.Bytes())
	return &out, nil
}

var (
	stdoutPrefix = []byte{1, 1, 1}
	stderrPrefix = []byte{2, 2, 2}
)

// demux splits a text log multiplexed with the daemon's 3-byte markers;
// text without markers is stdout.
func demux(b []byte) (stdout, stderr string) {
	if !bytes.Contains(b, stdoutPrefix) && !bytes.Contains(b, stderrPrefix) {
		return string(b), ""
	}
	var o, e bytes.Buffer
	cur := &o
	for len(b) > 0 {
		i := bytes.IndexByte(b, 1)
		j := bytes.IndexByte(b, 2)
		k := -1
		switch {
		case i >= 0 && (j < 0 || i < j):
			k = i
		case j >= 0:
			k = j
		}
		if k < 0 || k+3 > len(b) || !(bytes.Equal(b[k:k+3], stdoutPrefix) || bytes.Equal(b[k:k+3], stderrPrefix)) {
			if k < 0 {
				cur.Write(b)
				break
			}
			cur.Write(b[:k+1])
			b = b[k+1:]
			continue
		}
		cur.Write(b[:k])
		if b[k] == 1 {
			cur = &o
		} else {
			cur = &e
		}
		b = b[k+3:]
	}
	return o.String(), e.String()
}
