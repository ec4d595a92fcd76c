package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentctl/agentctl/providers/internal/hosted"

	"connectrpc.com/connect"

	"github.com/agentctl/agentctl/providers/e2b/internal/envd/filesystem"
	"github.com/agentctl/agentctl/providers/e2b/internal/envd/filesystem/filesystemconnect"
	"github.com/agentctl/agentctl/providers/e2b/internal/envd/process"
	"github.com/agentctl/agentctl/providers/e2b/internal/envd/process/processconnect"
)

// Envd is a client of one sandbox's envd daemon: the process and
// filesystem services over Connect RPC (protobuf), and the HTTP /files
// endpoints, all at https://49983-<sandboxID>.<domain>. Requests carry
// the sandbox's envd access token (X-Access-Token) and, for a user other
// than the template's default, the user as HTTP basic authentication, as
// the SDKs send them.
type Envd struct {
	s    *Sandbox
	base string
	Proc processconnect.ProcessClient
	FS   filesystemconnect.FilesystemClient
}

// Envd returns the client of the sandbox's daemon.
func (s *Sandbox) Envd() *Envd {
	base := "https://" + HostOf(EnvdPort, s.ID, s.Domain)
	e := &Envd{s: s, base: base}
	opts := connect.WithInterceptors(headerInterceptor{e})
	e.Proc = processconnect.NewProcessClient(s.c.http, base, opts)
	e.FS = filesystemconnect.NewFilesystemClient(s.c.http, base, opts)
	return e
}

// HostOf is the host serving port of sandbox id: <port>-<id>.<domain>.
func HostOf(port int, id, domain string) string {
	return strconv.Itoa(port) + "-" + id + "." + domain
}

// userKey carries the user an envd call runs as in its context.
type userKey struct{}

// AsUser returns ctx whose envd calls run as user ("" = the template's
// default user).
func AsUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

func (e *Envd) setHeaders(ctx context.Context, h http.Header) {
	if e.s.EnvdAccessToken != "" {
		h.Set("X-Access-Token", e.s.EnvdAccessToken)
	}
	if u, _ := ctx.Value(userKey{}).(string); u != "" {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u+":")))
	}
	h.Set("User-Agent", userAgent)
}

// headerInterceptor sets the envd headers on every Connect call.
type headerInterceptor struct{ e *Envd }

func (i headerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		i.e.setHeaders(ctx, req.Header())
		return next(ctx, req)
	}
}

func (i headerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		i.e.setHeaders(ctx, conn.RequestHeader())
		// envd sends keepalive events this often (seconds), so a proxy
		// does not close a quiet stream.
		conn.RequestHeader().Set("Keepalive-Ping-Interval", "50")
		return conn
	}
}

func (i headerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// rpcErr turns an envd Connect error into one that names the operation
// and the sandbox; not_found wraps fs.ErrNotExist-like sandbox errors
// through the message only, callers decide.
func (e *Envd) rpcErr(op string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
			return fmt.Errorf("%s (%s): envd is unreachable (%s): %w", op, e.s.where(), ce.Message(), errUnreachable)
		case connect.CodeUnauthenticated:
			return fmt.Errorf("%s (%s): envd refused the request (%s); the sandbox's access token or user is wrong", op, e.s.where(), ce.Message())
		}
		return fmt.Errorf("%s (%s): %s: %s", op, e.s.where(), ce.Code(), ce.Message())
	}
	return fmt.Errorf("%s (%s): %w", op, e.s.where(), err)
}

// errUnreachable marks an envd request that did not reach the daemon
// (the sandbox is paused or gone).
const errUnreachable = unreachableError("the sandbox's daemon did not answer")

type unreachableError string

func (e unreachableError) Error() string { return string(e) }

// Download streams a file's content (GET /files); the caller closes it.
func (e *Envd) Download(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := e.files(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Upload writes content to path (POST /files, multipart): envd creates
// the parent directories and replaces an existing file.
func (e *Envd) Upload(ctx context.Context, path string, content []byte) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, err := mw.CreateFormFile("file", "file")
	if err != nil {
		return err
	}
	w.Write(content)
	mw.Close()
	resp, err := e.files(ctx, http.MethodPost, path, buf.Bytes(), mw.FormDataContentType())
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

func (e *Envd) files(ctx context.Context, method, path string, body []byte, ctype string) (*http.Response, error) {
	op := "download " + strconv.Quote(path)
	if method == http.MethodPost {
		op = "upload " + strconv.Quote(path)
	}
	u := e.base + "/files?" + url.Values{"path": {path}}.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	e.setHeaders(ctx, req.Header)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := e.s.c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s (%s): %w", op, e.s.where(), ctx.Err())
		}
		return nil, fmt.Errorf("%s (%s): envd is unreachable (%v): %w", op, e.s.where(), unwrapAll(err), errUnreachable)
	}
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, apiError(op, e.s.where(), resp.StatusCode, hosted.ServerMessage(b), 1)
	}
	return resp, nil
}

// ListDir lists a directory (depth 1).
func (e *Envd) ListDir(ctx context.Context, path string) ([]*filesystem.EntryInfo, error) {
	resp, err := e.FS.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: path, Depth: 1}))
	if err != nil {
		return nil, e.rpcErr("list "+strconv.Quote(path), err)
	}
	return resp.Msg.GetEntries(), nil
}

// MakeDir creates a directory and its parents; an existing one is fine.
func (e *Envd) MakeDir(ctx context.Context, path string) error {
	_, err := e.FS.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: path}))
	if err != nil && connect.CodeOf(err) != connect.CodeAlreadyExists {
		return e.rpcErr("create directory "+strconv.Quote(path), err)
	}
	return nil
}

// Remove removes a file, a symlink or a directory with its contents.
func (e *Envd) Remove(ctx context.Context, path string) error {
	_, err := e.FS.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: path}))
	if err != nil {
		return e.rpcErr("remove "+strconv.Quote(path), err)
	}
	return nil
}

// StartParams is a process to start.
type StartParams struct {
	Argv []string
	Cwd  string
	Env  map[string]string
	// Stdin keeps the process's standard input open for SendInput;
	// otherwise it reads nothing.
	Stdin bool
	// Rows and Cols, when set, run it on a terminal of that size.
	Rows, Cols int
}

// Start starts a process and returns its event stream, after reading its
// start event (its pid).
func (e *Envd) Start(ctx context.Context, p StartParams) (*connect.ServerStreamForClient[process.StartResponse], uint32, error) {
	if len(p.Argv) == 0 {
		return nil, 0, errors.New("start process: no command")
	}
	cfg := &process.ProcessConfig{Cmd: p.Argv[0], Args: p.Argv[1:], Envs: p.Env}
	if p.Cwd != "" {
		cfg.Cwd = &p.Cwd
	}
	req := &process.StartRequest{Process: cfg, Stdin: &p.Stdin}
	if p.Rows > 0 && p.Cols > 0 {
		req.Pty = &process.PTY{Size: &process.PTY_Size{Rows: uint32(p.Rows), Cols: uint32(p.Cols)}}
	}
	stream, err := e.Proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, 0, e.rpcErr("start process", err)
	}
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if ev.GetKeepalive() != nil {
			continue
		}
		if st := ev.GetStart(); st != nil {
			return stream, st.GetPid(), nil
		}
		stream.Close()
		return nil, 0, fmt.Errorf("start process (%s): envd sent %T before the start event", e.s.where(), ev.GetEvent())
	}
	err = stream.Err()
	stream.Close()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, 0, e.rpcErr("start process", err)
}

func pidSelector(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

// SendStdin writes to a process's standard input (or, with pty, to its
// terminal).
func (e *Envd) SendStdin(ctx context.Context, pid uint32, data []byte, pty bool) error {
	in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: data}}
	if pty {
		in.Input = &process.ProcessInput_Pty{Pty: data}
	}
	_, err := e.Proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSelector(pid), Input: in}))
	if err != nil {
		return e.rpcErr("send input", err)
	}
	return nil
}

// CloseStdin closes a process's standard input (EOF).
func (e *Envd) CloseStdin(ctx context.Context, pid uint32) error {
	_, err := e.Proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSelector(pid)}))
	if err != nil {
		return e.rpcErr("close stdin", err)
	}
	return nil
}

// Kill sends SIGKILL to a process; one that has exited is not an error.
func (e *Envd) Kill(ctx context.Context, pid uint32) error {
	_, err := e.Proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSelector(pid), Signal: process.Signal_SIGNAL_SIGKILL}))
	if err != nil && connect.CodeOf(err) != connect.CodeNotFound {
		return e.rpcErr("kill process", err)
	}
	return nil
}

// Resize changes the terminal size of a process started with one.
func (e *Envd) Resize(ctx context.Context, pid uint32, rows, cols int) error {
	_, err := e.Proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: pidSelector(pid),
		Pty: &process.PTY{Size: &process.PTY_Size{Rows: uint32(rows), Cols: uint32(cols)}}}))
	if err != nil {
		return e.rpcErr("resize terminal", err)
	}
	return nil
}

// exitCode is a process's exit code from its end event: a process killed
// by a signal is reported as a shell does (128 + the signal).
func exitCode(end *process.ProcessEvent_EndEvent) int {
	st := end.GetStatus()
	if sig, ok := strings.CutPrefix(st, "signal: "); ok && end.GetExitCode() < 0 {
		switch sig {
		case "killed":
			return 137
		case "terminated":
			return 143
		case "interrupt":
			return 130
		case "hangup":
			return 129
		}
	}
	return int(end.GetExitCode())
}
