// Package fakeopenai is an in-process fake of the OpenAI Responses and Chat
// Completions APIs for tests. It is an httptest server that answers
// POST /v1/responses and POST /v1/chat/completions (streaming and not)
// from a queue of scripted replies or a handler function, validates every
// request body against the OpenAI OpenAPI document (testdata/openapi.yaml,
// vendored and embedded), validates everything it sends back against the
// same document, records every request with arrival and completion times, and injects
// faults: error statuses with Retry-After, hangs, truncated streams and
// malformed tool-call arguments.
package fakeopenai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is a function call the fake model makes. Arguments are sent as
// given, so a test can send malformed JSON.
type Call struct {
	CallID    string
	Name      string
	Arguments string
}

// Reasoning is a reasoning output item (Responses API only).
type Reasoning struct {
	ID               string
	EncryptedContent string
	Summary          []string
}

// Compaction is a compaction output item (Responses API only).
type Compaction struct {
	ID               string
	EncryptedContent string
}

// Usage is the token usage reported with a reply.
type Usage struct {
	InputTokens     int64
	OutputTokens    int64
	CachedTokens    int64
	ReasoningTokens int64
}

// FaultKind selects an injected failure.
type FaultKind int

const (
	// FaultNone answers normally.
	FaultNone FaultKind = iota
	// FaultStatus answers with Fault.Status, Fault.Header and an OpenAI
	// error body.
	FaultStatus
	// FaultHang sends nothing until the client gives up (or MaxHang).
	FaultHang
	// FaultTruncate starts the answer and drops the connection mid-way.
	FaultTruncate
)

// Fault is an injected failure for one request.
type Fault struct {
	Kind    FaultKind
	Status  int
	Header  map[string]string
	Message string
	// Param names the offending request field in the error body; Code
	// is its error code (model_not_found).
	Param string
	Code  string
	// AfterEvents is how many SSE events (or, for a non-streaming
	// request, how many bytes of the body) are sent before the
	// connection is dropped; default 2 events / 20 bytes.
	AfterEvents int
	// MaxHang bounds a hang (default 30s) in case the client never gives up.
	MaxHang time.Duration
}

// Reply is one scripted answer. Output items are emitted in the order
// reasoning, compaction, hosted tool calls, message text, function calls.
type Reply struct {
	ID         string
	Reasoning  *Reasoning
	Compaction *Compaction
	// Hosted are output items of hosted tool calls (web_search_call,
	// file_search_call, code_interpreter_call, image_generation_call),
	// sent as given (Responses API only).
	Hosted []map[string]any
	Text   string
	Calls  []Call
	Usage  Usage
	// Delay holds the answer back, so that concurrent requests overlap
	// visibly in the request log.
	Delay time.Duration
	Fault Fault
}

// Text is a reply with an assistant message.
func Text(s string) Reply { return Reply{Text: s} }

// JSON is a structured-output reply: v marshalled as the message text.
func JSON(v any) Reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakeopenai.JSON: %v", err))
	}
	return Reply{Text: string(b)}
}

// Calls is a reply with one or more function calls.
func Calls(calls ...Call) Reply { return Reply{Calls: calls} }

// FunctionCall builds a Call.
func FunctionCall(callID, name, arguments string) Call {
	return Call{CallID: callID, Name: name, Arguments: arguments}
}

// Status is a fault reply with an HTTP status and header key/value pairs,
// e.g. Status(429, "Retry-After", "1").
func Status(code int, header ...string) Reply {
	h := map[string]string{}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	return Reply{Fault: Fault{Kind: FaultStatus, Status: code, Header: h}}
}

// Hang is a fault reply that never answers.
func Hang() Reply { return Reply{Fault: Fault{Kind: FaultHang}} }

// Truncated is a fault reply whose stream is cut after n events.
func Truncated(n int) Reply { return Reply{Fault: Fault{Kind: FaultTruncate, AfterEvents: n}} }

// Request is one recorded request.
type Request struct {
	Seq    int // 1-based arrival order
	Path   string
	Header http.Header
	Body   []byte
	// JSON is the decoded body.
	JSON   map[string]any
	Stream bool
	// Arrived and Completed bound the time the server spent on it;
	// InFlight counts requests being served when it arrived, itself
	// included.
	Arrived   time.Time
	Completed time.Time
	InFlight  int
	// Served describes what was sent back ("reply", "status 429", ...).
	Served string
	// Invalid is the validation error when the body did not conform.
	Invalid error
}

// Overlaps reports whether two requests were being served at the same time.
func (r Request) Overlaps(o Request) bool {
	return r.Arrived.Before(o.Completed) && o.Arrived.Before(r.Completed)
}

// Input returns the request's "input" (Responses) or "messages" (Chat
// Completions) list.
func (r Request) Input() []map[string]any {
	raw, ok := r.JSON["input"].([]any)
	if !ok {
		raw, _ = r.JSON["messages"].([]any)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, e := range raw {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// InputLines describes the request's input one item a line, for tests
// to compare: "call NAME" for a function call, "output CALLID" for its
// output, "ROLE: TEXT" for a message.
func (r Request) InputLines() []string {
	var out []string
	for _, it := range r.Input() {
		switch it["type"] {
		case "function_call":
			out = append(out, fmt.Sprintf("call %v", it["name"]))
		case "function_call_output":
			out = append(out, fmt.Sprintf("output %v", it["call_id"]))
		default:
			out = append(out, fmt.Sprintf("%v: %s", it["role"], contentText(it["content"])))
		}
	}
	return out
}

// contentText is a message's content as text: a string, or the texts of
// its parts.
func contentText(c any) string {
	switch c := c.(type) {
	case string:
		return c
	case []any:
		var parts []string
		for _, p := range c {
			if m, ok := p.(map[string]any); ok {
				parts = append(parts, fmt.Sprint(m["text"]))
			}
		}
		return strings.Join(parts, "")
	}
	return fmt.Sprint(c)
}

// Option configures a Server.
type Option func(*Server)

// WithHandler answers every request the queue does not: h is called
// concurrently with the recorded request (Completed not yet set).
func WithHandler(h func(Request) Reply) Option { return func(s *Server) { s.handler = h } }

// WithoutResponseValidation stops the fake from checking its own output
// against the OpenAPI document (it is on by default).
func WithoutResponseValidation() Option { return func(s *Server) { s.validateOut = false } }

// Server is the fake. Its URL (ending in /v1) is the client's base URL.
type Server struct {
	URL string

	t           testing.TB
	spec        *Spec
	ts          *httptest.Server
	handler     func(Request) Reply
	validateOut bool

	mu          sync.Mutex
	queue       []Reply
	requests    []*Request
	inFlight    int
	maxInFlight int
}

// New starts a fake server that is closed when the test ends. It fails
// the test if the OpenAPI document cannot be found or loaded.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	spec, err := LoadSpec()
	if err != nil {
		t.Fatalf("fakeopenai: %v", err)
	}
	s := &Server{t: t, spec: spec, validateOut: true}
	for _, o := range opts {
		o(s)
	}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.ts.URL + "/v1"
	t.Cleanup(s.Close)
	return s
}

// Close shuts the server down, interrupting hung requests.
func (s *Server) Close() {
	s.ts.CloseClientConnections()
	s.ts.Close()
}

// Enqueue appends replies to the queue; each request takes the next one.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Pending is the number of queued replies not yet used.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

func (s *Server) setServed(rec *Request, what string) {
	s.mu.Lock()
	rec.Served = what
	s.mu.Unlock()
}

// WaitIdle blocks until no request is being served (or ctx ends), so that
// every recorded request has its Completed time.
func (s *Server) WaitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		n := s.inFlight
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fakeopenai: %d requests still in flight: %w", n, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Requests returns a snapshot of the recorded requests in arrival order.
// A request whose answer the client has read may still lack its
// Completed time for a moment; call WaitIdle first when it matters.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = *r
	}
	return out
}

// MaxInFlight is the largest number of requests served at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var specPath string
	switch r.URL.Path {
	case "/v1/responses":
		specPath = "/responses"
	case "/v1/chat/completions":
		specPath = "/chat/completions"
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", fmt.Sprintf("fakeopenai serves POST /v1/responses and /v1/chat/completions, not %s %s", r.Method, r.URL.Path))
		s.t.Errorf("fakeopenai: unexpected request %s %s", r.Method, r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "only POST is supported")
		s.t.Errorf("fakeopenai: unexpected method %s %s", r.Method, r.URL.Path)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // client went away
	}
	rec := &Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Arrived: time.Now()}
	_ = json.Unmarshal(body, &rec.JSON)
	if st, ok := rec.JSON["stream"].(bool); ok {
		rec.Stream = st
	}

	s.mu.Lock()
	rec.Seq = len(s.requests) + 1
	s.requests = append(s.requests, rec)
	s.inFlight++
	rec.InFlight = s.inFlight
	if s.inFlight > s.maxInFlight {
		s.maxInFlight = s.inFlight
	}
	var reply Reply
	haveReply := false
	if len(s.queue) > 0 {
		reply, s.queue = s.queue[0], s.queue[1:]
		haveReply = true
	}
	snapshot := *rec
	s.mu.Unlock()

	s.setServed(rec, "reply")
	defer func() {
		s.mu.Lock()
		rec.Completed = time.Now()
		s.inFlight--
		s.mu.Unlock()
	}()

	if err := s.spec.ValidateRequest(r.Context(), specPath, body); err != nil {
		s.mu.Lock()
		rec.Invalid = err
		s.mu.Unlock()
		s.setServed(rec, "invalid request")
		s.t.Errorf("fakeopenai: request %d (POST %s): %v\nbody: %s", rec.Seq, r.URL.Path, err, truncate(body, 4000))
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if !haveReply {
		if s.handler == nil {
			s.setServed(rec, "no reply queued")
			s.t.Errorf("fakeopenai: request %d (POST %s): no reply queued", rec.Seq, r.URL.Path)
			writeError(w, http.StatusInternalServerError, "server_error", "fakeopenai: no reply queued")
			return
		}
		reply = s.handler(snapshot)
	}

	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-r.Context().Done():
			s.setServed(rec, "client gave up during delay")
			return
		}
	}

	w.Header().Set("x-request-id", fmt.Sprintf("req_fake_%d", rec.Seq))
	switch reply.Fault.Kind {
	case FaultStatus:
		s.setServed(rec, fmt.Sprintf("status %d", reply.Fault.Status))
		for k, v := range reply.Fault.Header {
			w.Header().Set(k, v)
		}
		msg := reply.Fault.Message
		if msg == "" {
			msg = fmt.Sprintf("fakeopenai injected status %d", reply.Fault.Status)
		}
		typ := "server_error"
		if reply.Fault.Status == http.StatusTooManyRequests {
			typ = "rate_limit_exceeded"
		}
		writeErrorParam(w, reply.Fault.Status, typ, msg, reply.Fault.Param, reply.Fault.Code)
		return
	case FaultHang:
		s.setServed(rec, "hang")
		limit := reply.Fault.MaxHang
		if limit <= 0 {
			limit = 30 * time.Second
		}
		select {
		case <-r.Context().Done():
		case <-time.After(limit):
			writeError(w, http.StatusGatewayTimeout, "server_error", "fakeopenai: hang limit reached")
		}
		return
	}

	b := &builder{reply: reply, req: rec.JSON, seq: rec.Seq}
	if reply.Fault.Kind == FaultTruncate {
		s.setServed(rec, "truncated")
	}
	if specPath == "/responses" {
		s.serveResponses(w, b, rec.Stream, reply.Fault)
	} else {
		s.serveChat(w, b, rec.Stream, reply.Fault)
	}
}

func (s *Server) serveResponses(w http.ResponseWriter, b *builder, stream bool, f Fault) {
	if !stream {
		s.writeJSON(w, "Response", b.response("completed"), f)
		return
	}
	events := b.responseEvents()
	sse := s.newSSE(w, f, len(events))
	for _, ev := range events {
		if !sse.send(ev["type"].(string), ev) {
			return
		}
	}
}

func (s *Server) serveChat(w http.ResponseWriter, b *builder, stream bool, f Fault) {
	if !stream {
		s.writeJSON(w, "CreateChatCompletionResponse", b.chatCompletion(), f)
		return
	}
	chunks := b.chatChunks()
	sse := s.newSSE(w, f, len(chunks))
	for _, chunk := range chunks {
		if !sse.send("", chunk) {
			return
		}
	}
	sse.done()
}

func (s *Server) writeJSON(w http.ResponseWriter, component string, v any, f Fault) {
	data, err := json.Marshal(v)
	if err != nil {
		s.t.Errorf("fakeopenai: encoding %s: %v", component, err)
		return
	}
	if s.validateOut {
		if err := s.spec.ValidateSchema(component, data); err != nil {
			s.t.Errorf("fakeopenai: the fake's own %s: %v\n%s", component, err, truncate(data, 4000))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if f.Kind == FaultTruncate {
		n := f.AfterEvents
		if n <= 0 {
			n = 20
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data[:min(n, len(data))])
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		panic(http.ErrAbortHandler) // drops the connection mid-body
	}
	_, _ = w.Write(data)
}

type sseWriter struct {
	s    *Server
	w    http.ResponseWriter
	cut  int // events sent before the connection drops; -1: never
	sent int
}

// newSSE starts an event stream of total events; a FaultTruncate cuts it
// after Fault.AfterEvents events (default 2), always before the last one.
func (s *Server) newSSE(w http.ResponseWriter, f Fault, total int) *sseWriter {
	cut := -1
	if f.Kind == FaultTruncate {
		cut = f.AfterEvents
		if cut <= 0 {
			cut = 2
		}
		cut = min(cut, total-1)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{s: s, w: w, cut: cut}
}

// send writes one event; it reports false when the stream must stop.
func (x *sseWriter) send(event string, v any) bool {
	if x.cut >= 0 && x.sent >= x.cut {
		if fl, ok := x.w.(http.Flusher); ok {
			fl.Flush()
		}
		panic(http.ErrAbortHandler) // drops the connection mid-stream
	}
	data, err := json.Marshal(v)
	if err != nil {
		x.s.t.Errorf("fakeopenai: encoding event: %v", err)
		return false
	}
	if x.s.validateOut {
		x.s.validateEvent(event, data)
	}
	var buf bytes.Buffer
	if event != "" {
		fmt.Fprintf(&buf, "event: %s\n", event)
	}
	fmt.Fprintf(&buf, "data: %s\n\n", data)
	if _, err := x.w.Write(buf.Bytes()); err != nil {
		return false
	}
	if fl, ok := x.w.(http.Flusher); ok {
		fl.Flush()
	}
	x.sent++
	return true
}

func (x *sseWriter) done() {
	_, _ = io.WriteString(x.w, "data: [DONE]\n\n")
	if fl, ok := x.w.(http.Flusher); ok {
		fl.Flush()
	}
}

func (s *Server) validateEvent(event string, data []byte) {
	component := "CreateChatCompletionStreamResponse"
	if event != "" {
		c, ok := s.spec.eventSchema(event)
		if !ok {
			s.t.Errorf("fakeopenai: event type %q is not a Responses stream event in the OpenAPI document", event)
			return
		}
		component = c
	}
	if err := s.spec.ValidateSchema(component, data); err != nil {
		s.t.Errorf("fakeopenai: the fake's own %s event: %v\n%s", event, err, truncate(data, 4000))
	}
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeErrorParam(w, status, typ, msg, "", "")
}

func writeErrorParam(w http.ResponseWriter, status int, typ, msg, param, code string) {
	var p, c any
	if param != "" {
		p = param
	}
	if code != "" {
		c = code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": p, "code": c},
	})
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// splitText cuts s into a few pieces (streamed as deltas).
func splitText(s string) []string {
	if s == "" {
		return nil
	}
	rs := []rune(s)
	n := 3
	if len(rs) < n {
		n = len(rs)
	}
	size := (len(rs) + n - 1) / n
	var out []string
	for i := 0; i < len(rs); i += size {
		out = append(out, string(rs[i:min(i+size, len(rs))]))
	}
	return out
}

// WaitInFlight blocks until n requests have been served at once (or ctx
// ends). A handler that calls it is a barrier: no answer leaves before n
// requests are in flight, which proves concurrency without timing
// assumptions.
func (s *Server) WaitInFlight(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		cur := s.maxInFlight
		s.mu.Unlock()
		if cur >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fakeopenai: waiting for %d requests in flight (have %d): %w", n, cur, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}
