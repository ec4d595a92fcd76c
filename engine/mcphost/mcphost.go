// Package mcphost connects agents to Model Context Protocol servers with
// the MCP go-sdk: it starts a stdio server on the host or inside a
// sandbox (through sandbox.Workspace.StartProcess, so every provider that
// can run an attached process can host one), or reaches a streamable
// HTTP server; it lists the server's tools and calls them as agent tools.
// A server that crashes is started again for the next call; a call that
// fails or times out is a tool error the model sees, never a hung run.
package mcphost

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// Version is the client version sent in the MCP handshake.
const Version = "1"

// maxRestarts bounds how often a server that stopped or hung is started
// again in one session.
const maxRestarts = 3

// maxPingWait bounds the ping that tells a hung server from a slow tool.
const maxPingWait = 5 * time.Second

// Server is how to reach one MCP server.
type Server struct {
	// Name is the mcp_server block's name, used in messages.
	Name string
	// Command starts a stdio server; Env is added to its environment.
	Command []string
	Env     map[string]string
	// Dir is the host directory a host stdio server starts in.
	Dir string
	// Workspace, when set, runs the stdio server inside that sandbox.
	Workspace *sandbox.Workspace
	// URL is a streamable HTTP server's endpoint; Headers go with every
	// request.
	URL     string
	Headers map[string]string
	// AllowedTools, when non-nil, are the only tools offered.
	AllowedTools []string
	// Timeout bounds connecting (with listing the tools) and each call.
	Timeout time.Duration
	// Log receives the server's stderr and a line for each crash,
	// restart and timeout. Nil discards them.
	Log io.Writer
	// HTTPClient is used for a streamable HTTP server (nil: a default
	// client).
	HTTPClient *http.Client
	// Scrub, when set, masks sensitive values in tool results before the
	// model sees them.
	Scrub *sandbox.Scrubber
}

func (s *Server) timeout() time.Duration {
	if s.Timeout <= 0 {
		return time.Minute
	}
	return s.Timeout
}

// ToolInfo is one of a server's tools as agents see it.
type ToolInfo struct {
	// Name is the server's name for the tool; Exposed is the function
	// name the model calls (model.SafeToolName of Name).
	Name        string          `json:"name"`
	Exposed     string          `json:"exposed"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Session is a connected server. It is safe for concurrent calls.
type Session struct {
	srv Server

	// stderr keeps the end of the server's stderr for error messages.
	stderr tailBuffer

	// restartMu lets one call at a time start the server again.
	restartMu sync.Mutex

	mu       sync.Mutex
	cs       *mcp.ClientSession
	proc     *serverProc // the server's process, if any
	restarts int
	closed   bool
	tools    []ToolInfo
}

// Connect starts (or reaches) the server and lists its tools. A tool in
// AllowedTools the server does not offer is an error.
func Connect(ctx context.Context, srv Server) (*Session, error) {
	s := &Session{srv: srv}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	tools, err := s.listTools(ctx)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.tools = tools
	return s, nil
}

// List connects, lists the server's tools and disconnects: the refresh
// plan makes.
func List(ctx context.Context, srv Server) ([]ToolInfo, error) {
	s, err := Connect(ctx, srv)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Tools(), nil
}

// Tools are the server's tools, filtered by AllowedTools, in the server's
// order.
func (s *Session) Tools() []ToolInfo { return slices.Clone(s.tools) }

func (s *Session) logf(format string, args ...any) {
	if s.srv.Log != nil {
		fmt.Fprintf(s.srv.Log, "agentctl: mcp_server.%s: "+format+"\n", append([]any{s.srv.Name}, args...)...)
	}
}

// connect starts the transport and runs the MCP handshake.
func (s *Session) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, s.srv.timeout())
	defer cancel()
	transport, proc, err := s.transport(ctx)
	if err != nil {
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentctl", Version: Version}, nil)
	cs, err := client.Connect(cctx, transport, nil)
	if err != nil {
		proc.end()
		if cctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("mcp_server.%s did not complete the MCP handshake within %s (raise timeout in its block if it starts slowly)%s", s.srv.Name, s.srv.timeout(), s.stderr.note())
		}
		return fmt.Errorf("mcp_server.%s did not start: %w%s", s.srv.Name, err, s.stderr.note())
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.cs, s.proc = cs, proc
	}
	s.mu.Unlock()
	if closed {
		// Closed while the server started.
		cs.Close()
		proc.end()
		return fmt.Errorf("mcp_server.%s: the session is closed", s.srv.Name)
	}
	return nil
}

// serverProc is a stdio server's process (nil for an HTTP server).
type serverProc struct {
	// stop ends the process.
	stop func()
	// running reports whether the process still runs.
	running func() bool
}

// end stops the process, if any.
func (p *serverProc) end() {
	if p != nil {
		p.stop()
	}
}

// transport builds the connection to the server: a host process, a
// process in the sandbox, or HTTP (without a process).
func (s *Session) transport(ctx context.Context) (mcp.Transport, *serverProc, error) {
	srv := &s.srv
	switch {
	case srv.URL != "":
		hc := srv.HTTPClient
		if hc == nil {
			hc = &http.Client{}
		}
		if len(srv.Headers) > 0 {
			c := *hc
			c.Transport = &headerTransport{base: hc.Transport, headers: srv.Headers}
			hc = &c
		}
		return &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, MaxRetries: 2, DisableStandaloneSSE: true}, nil, nil
	case len(srv.Command) == 0:
		return nil, nil, fmt.Errorf("mcp_server.%s has neither a command nor a url", srv.Name)
	case srv.Workspace != nil:
		p, err := srv.Workspace.StartProcess(ctx, sandbox.ProcessRequest{Argv: srv.Command, Env: srv.Env})
		if err != nil {
			return nil, nil, fmt.Errorf("mcp_server.%s: starting %s in %s: %w", srv.Name, srv.Command[0], srv.Workspace.Address, err)
		}
		go s.copyStderr(p.Stderr())
		exited := make(chan struct{})
		go func() {
			code, err := p.Wait()
			if err != nil {
				s.logf("the server's process ended: %v", err)
			} else {
				s.logf("the server's process exited with code %d", code)
			}
			close(exited)
		}()
		stop := func() {
			// Closing stdin asks a stdio server to exit; one that does not
			// is killed.
			p.Stdin().Close()
			select {
			case <-exited:
			case <-time.After(2 * time.Second):
				p.Kill()
				<-exited
			}
		}
		running := func() bool {
			select {
			case <-exited:
				return false
			default:
				return true
			}
		}
		return &mcp.IOTransport{Reader: io.NopCloser(p.Stdout()), Writer: p.Stdin()}, &serverProc{stop: stop, running: running}, nil
	default:
		h, err := startHostServer(srv, s.stderrWriter(), s.logf)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.IOTransport{Reader: h.stdout, Writer: h.stdin}, &serverProc{stop: h.stop, running: h.running}, nil
	}
}

// serverEnv is agentctl's environment plus env, for a host server.
func serverEnv(env map[string]string) []string {
	out := os.Environ()
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func (s *Session) copyStderr(r io.Reader) {
	_, _ = io.Copy(s.stderrWriter(), r)
}

// stderrWriter receives the server's stderr: its log, and the tail kept
// for messages.
func (s *Session) stderrWriter() io.Writer {
	if s.srv.Log == nil {
		return &s.stderr
	}
	return io.MultiWriter(s.srv.Log, &s.stderr)
}

// tailBuffer keeps the last tailSize bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 2048

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = slices.Clone(t.buf[len(t.buf)-tailSize:])
	}
	return len(p), nil
}

// note is the tail as the end of an error message ("" when empty).
func (t *tailBuffer) note() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	text := strings.TrimSpace(string(t.buf))
	if text == "" {
		return ""
	}
	return "; its stderr ends with:\n" + text
}

// listTools lists the server's tools, keeping the allowed ones.
func (s *Session) listTools(ctx context.Context) ([]ToolInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, s.srv.timeout())
	defer cancel()
	s.mu.Lock()
	cs := s.cs
	s.mu.Unlock()
	var out []ToolInfo
	offered := map[string]bool{}
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			if cctx.Err() != nil && ctx.Err() == nil {
				return nil, fmt.Errorf("mcp_server.%s did not list its tools within %s", s.srv.Name, s.srv.timeout())
			}
			return nil, fmt.Errorf("mcp_server.%s: listing tools: %w", s.srv.Name, err)
		}
		offered[t.Name] = true
		if s.srv.AllowedTools != nil && !slices.Contains(s.srv.AllowedTools, t.Name) {
			continue
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = []byte(`{"type":"object","properties":{}}`)
		}
		out = append(out, ToolInfo{Name: t.Name, Exposed: model.SafeToolName(t.Name), Description: t.Description, InputSchema: schema})
	}
	var missing []string
	for _, t := range s.srv.AllowedTools {
		if !offered[t] {
			missing = append(missing, fmt.Sprintf("%q", t))
		}
	}
	if len(missing) > 0 {
		names := slices.Sorted(maps.Keys(offered))
		return nil, fmt.Errorf("mcp_server.%s offers no tool named %s (allowed_tools); it offers: %s", s.srv.Name, strings.Join(missing, ", "), strings.Join(names, ", "))
	}
	return out, nil
}

// Close ends the session and the server's process.
func (s *Session) Close() error {
	s.mu.Lock()
	cs, proc := s.cs, s.proc
	s.cs, s.proc, s.closed = nil, nil, true
	s.mu.Unlock()
	var err error
	if cs != nil {
		err = cs.Close()
	}
	proc.end()
	return err
}

// live returns the session while its server runs (nil when there is
// none); a session whose server stopped since the last call (it exited,
// or crashed while idle) is dropped.
func (s *Session) live() (*mcp.ClientSession, error) {
	s.mu.Lock()
	cs, proc, closed := s.cs, s.proc, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, fmt.Errorf("mcp_server.%s: the session is closed", s.srv.Name)
	case cs == nil || proc == nil || proc.running():
		return cs, nil
	}
	s.logf("the server stopped since the last call")
	s.dropSession(cs)
	return nil, nil
}

// session returns the live session, starting the server again when it
// stopped or hung (at most maxRestarts times).
func (s *Session) session(ctx context.Context) (*mcp.ClientSession, error) {
	if cs, err := s.live(); cs != nil || err != nil {
		return cs, err
	}
	// One call starts the server again; calls waiting here then use it.
	s.restartMu.Lock()
	defer s.restartMu.Unlock()
	if cs, err := s.live(); cs != nil || err != nil {
		return cs, err
	}
	s.mu.Lock()
	if s.restarts >= maxRestarts {
		s.mu.Unlock()
		return nil, fmt.Errorf("mcp_server.%s was started again %d times in this run, the limit; it is not started again", s.srv.Name, maxRestarts)
	}
	s.restarts++
	n := s.restarts
	s.mu.Unlock()
	s.logf("starting the server again (restart %d of %d)", n, maxRestarts)
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	cs, err := s.live()
	if cs == nil && err == nil {
		err = fmt.Errorf("mcp_server.%s stopped as soon as it started again%s", s.srv.Name, s.stderr.note())
	}
	return cs, err
}

// dropSession forgets cs and stops its server, so the next call starts
// the server again.
func (s *Session) dropSession(cs *mcp.ClientSession) {
	s.mu.Lock()
	var proc *serverProc
	if s.cs == cs {
		s.cs = nil
		proc, s.proc = s.proc, nil
	}
	s.mu.Unlock()
	cs.Close()
	proc.end()
}

// againNote says whether the next call starts the server again.
func (s *Session) againNote() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restarts >= maxRestarts {
		return fmt.Sprintf("it was started again %d times in this run, the limit, and is not started again", maxRestarts)
	}
	return "it is started again for the next call"
}

// Call calls the server's tool name with JSON arguments. A tool result
// marked as an error, a crash and a timeout are returned as errors (tool
// errors the model sees).
func (s *Session) Call(ctx context.Context, name string, arguments string) (tools.Output, error) {
	args := json.RawMessage(arguments)
	if strings.TrimSpace(arguments) == "" {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return tools.Output{}, fmt.Errorf("the arguments are not JSON: %s", arguments)
	}
	for again := false; ; again = true {
		cs, err := s.session(ctx)
		if err != nil {
			return tools.Output{}, err
		}
		cctx, cancel := context.WithTimeout(ctx, s.srv.timeout())
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args})
		timedOut := cctx.Err() != nil
		cancel()
		if err == nil {
			return s.output(res)
		}
		if !again && !timedOut && notSent(err) {
			// The server stopped since the last call (it exited or
			// crashed while idle): the call never reached it, so it is
			// made again, to the server started again.
			s.logf("the server had stopped before the call of %s: %v", name, err)
			s.dropSession(cs)
			continue
		}
		return tools.Output{}, s.callFailed(ctx, cs, name, err, timedOut)
	}
}

// notSent reports whether err says a call could not be sent: the
// connection had ended (the client refuses new calls once it read the
// end of the server's output), or writing to the server's stdin failed as
// nothing reads it any more.
func notSent(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, syscall.EPIPE)
}

// callFailed turns a call's failure into the error the model sees. A
// server that stopped, or that answers neither the call within the
// timeout nor a ping after it (hung), is stopped, and started again for
// the next call.
func (s *Session) callFailed(ctx context.Context, cs *mcp.ClientSession, name string, err error, timedOut bool) error {
	var wire *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case timedOut:
		s.logf("tool %s did not answer within %s", name, s.srv.timeout())
		alive := s.answers(ctx, cs)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if alive {
			return fmt.Errorf("mcp_server.%s: tool %s did not answer within %s", s.srv.Name, name, s.srv.timeout())
		}
		s.logf("the server does not answer a ping either: it is stopped")
		s.dropSession(cs)
		return fmt.Errorf("mcp_server.%s: tool %s did not answer within %s, nor did the server answer a ping after it (its stderr is in the run's MCP log); %s", s.srv.Name, name, s.srv.timeout(), s.againNote())
	case errors.As(err, &wire), !errors.Is(err, mcp.ErrConnectionClosed) && s.answers(ctx, cs):
		// The server answered with an error, or is still there.
		return fmt.Errorf("mcp_server.%s: tool %s: %w", s.srv.Name, name, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.logf("the connection failed during tool %s: %v", name, err)
	s.dropSession(cs)
	return fmt.Errorf("mcp_server.%s stopped during the call of %s (its stderr is in the run's MCP log); %s", s.srv.Name, name, s.againNote())
}

// answers reports whether the server answers a ping within
// min(timeout, maxPingWait): whether it still serves.
func (s *Session) answers(ctx context.Context, cs *mcp.ClientSession) bool {
	pctx, cancel := context.WithTimeout(ctx, min(s.srv.timeout(), maxPingWait))
	defer cancel()
	return cs.Ping(pctx, nil) == nil
}

// output is a tool result as the model sees it: scrubbed, and an error
// when the result is marked as one.
func (s *Session) output(res *mcp.CallToolResult) (tools.Output, error) {
	out := resultOutput(res)
	if s.srv.Scrub != nil {
		out.Text = s.srv.Scrub.String(out.Text)
	}
	if res.IsError {
		return tools.Output{}, errors.New(out.Text)
	}
	return out, nil
}

// resultOutput renders a tool result as text and images.
func resultOutput(res *mcp.CallToolResult) tools.Output {
	var out tools.Output
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			out.Images = append(out.Images, model.Image{MediaType: c.MIMEType, Data: c.Data})
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				if c.Resource.Text != "" {
					parts = append(parts, c.Resource.Text)
				} else {
					parts = append(parts, fmt.Sprintf("[resource %s: %d bytes of %s, base64] %s", c.Resource.URI, len(c.Resource.Blob), c.Resource.MIMEType, base64.StdEncoding.EncodeToString(c.Resource.Blob)))
				}
			}
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %d bytes of %s]", len(c.Data), c.MIMEType))
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	// Structured content is the result's data: the model sees it as JSON
	// after the text, unless a text part already is that JSON (as the
	// protocol recommends servers send it).
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil && !slices.ContainsFunc(parts, func(p string) bool { return sameJSON(p, b) }) {
			parts = append(parts, string(b))
		}
	}
	out.Text = strings.Join(parts, "\n")
	return out
}

// AgentTools are the session's tools as agent tools, under their exposed
// names.
func (s *Session) AgentTools() []tools.Tool {
	out := make([]tools.Tool, 0, len(s.tools))
	for _, t := range s.tools {
		out = append(out, &agentTool{s: s, info: t})
	}
	return out
}

type agentTool struct {
	s    *Session
	info ToolInfo
}

func (t *agentTool) Definition() model.Tool {
	desc := t.info.Description
	if desc == "" {
		desc = fmt.Sprintf("Tool %s of the MCP server %s.", t.info.Name, t.s.srv.Name)
	}
	return model.Tool{Name: t.info.Exposed, Description: desc, Parameters: t.info.InputSchema}
}

func (t *agentTool) Call(ctx context.Context, arguments string) (tools.Output, error) {
	return t.s.Call(ctx, t.info.Name, arguments)
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	base := h.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// sameJSON reports whether text is the JSON value b.
func sameJSON(text string, b []byte) bool {
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return false
	}
	c, err := json.Marshal(v)
	return err == nil && string(c) == string(b)
}
