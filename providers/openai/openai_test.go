package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/openai"
)

const sentinelKey = "sk-sentinel-DO-NOT-LEAK-8c1f2e"

// headerLog records the response headers the client saw, so a test can
// prove a header (Retry-After) reached it.
type headerLog struct {
	mu      sync.Mutex
	headers []http.Header
	next    http.RoundTripper
}

func (h *headerLog) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(r)
	if resp != nil {
		h.mu.Lock()
		h.headers = append(h.headers, resp.Header.Clone())
		h.mu.Unlock()
	}
	return resp, err
}

func (h *headerLog) saw(key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var vals []string
	for _, hd := range h.headers {
		if v := hd.Get(key); v != "" {
			vals = append(vals, v)
		}
	}
	return vals
}

type harness struct {
	fake   *fakeopenai.Server
	client *openai.Client
	log    *headerLog
}

func newHarness(t *testing.T, api string, mod func(*openai.Config)) *harness {
	t.Helper()
	fake := fakeopenai.New(t)
	log := &headerLog{next: http.DefaultTransport}
	cfg := openai.Config{
		API:            api,
		Timeout:        5 * time.Second,
		MaxRetries:     3,
		RetryBaseDelay: time.Millisecond,
		HTTPClient:     &http.Client{Transport: log},
		LookupEnv: openai.EnvLookup([]string{
			"OPENAI_API_KEY=" + sentinelKey,
			"OPENAI_BASE_URL=" + fake.URL,
			"OPENAI_ORG_ID=org-test",
			"OPENAI_PROJECT_ID=proj-test",
		}),
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{fake: fake, client: c, log: log}
}

type events struct {
	mu  sync.Mutex
	evs []model.Event
}

func (e *events) sink(ev model.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) text() string {
	var b strings.Builder
	for _, ev := range e.evs {
		if ev.Type == model.EventTextDelta {
			b.WriteString(ev.Delta)
		}
	}
	return b.String()
}

func (e *events) toolCalls() []string {
	var out []string
	for _, ev := range e.evs {
		if ev.Type == model.EventToolCallStart {
			out = append(out, ev.Name+"/"+ev.CallID)
		}
	}
	return out
}

func userMsg(s string) model.Item { return model.Item{Type: model.ItemMessage, Role: "user", Text: s} }

var execTool = model.Tool{
	Name:        "exec_command",
	Description: "Run a shell command.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"],"additionalProperties":false}`),
	Strict:      true,
}

func baseRequest() *model.Request {
	return &model.Request{
		Agent: "analyst", Model: "gpt-5", Instructions: "You are an analyst.",
		Input: []model.Item{userMsg("What is in data/?")},
		Tools: []model.Tool{execTool},
	}
}

func mustRespond(t *testing.T, h *harness, req *model.Request, ev *events) *model.Response {
	t.Helper()
	var sink func(model.Event)
	if ev != nil {
		sink = ev.sink
	}
	resp, err := h.client.Respond(context.Background(), req, sink)
	if err != nil {
		t.Fatalf("Respond: %v (fake served: %s)", err, served(h.fake.Requests()))
	}
	return resp
}

func TestMissingKey(t *testing.T) {
	_, err := openai.New(openai.Config{LookupEnv: openai.EnvLookup(nil)})
	if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("got %v, want an error telling to set OPENAI_API_KEY", err)
	}
	_, err = openai.New(openai.Config{APIKey: "x", API: "completions"})
	if err == nil || !strings.Contains(err.Error(), "chat_completions") {
		t.Fatalf("got %v, want an error listing the supported APIs", err)
	}
}

func TestResponsesText(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Reply{Text: "Q3 had the highest revenue.", Usage: fakeopenai.Usage{InputTokens: 120, OutputTokens: 9, CachedTokens: 64, ReasoningTokens: 4}})
	ev := &events{}
	resp := mustRespond(t, h, baseRequest(), ev)
	if got := resp.Text(); got != "Q3 had the highest revenue." {
		t.Fatalf("text %q", got)
	}
	if got := ev.text(); got != resp.Text() {
		t.Fatalf("streamed deltas %q != final text %q", got, resp.Text())
	}
	if want := (model.Usage{InputTokens: 120, OutputTokens: 9, CachedTokens: 64, ReasoningTokens: 4}); resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
	if resp.Output[0].Agent != "analyst" || resp.ID == "" {
		t.Fatalf("output %+v id %q", resp.Output, resp.ID)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if !r.Stream || r.JSON["store"] != false || r.JSON["instructions"] != "You are an analyst." || r.JSON["model"] != "gpt-5" {
		t.Fatalf("body %s", r.Body)
	}
	if inc, _ := json.Marshal(r.JSON["include"]); string(inc) != `["reasoning.encrypted_content"]` {
		t.Fatalf("include %s", inc)
	}
	if _, ok := r.JSON["previous_response_id"]; ok {
		t.Fatal("previous_response_id sent; the provider replays the full input")
	}
	tools, _ := json.Marshal(r.JSON["tools"])
	if !strings.Contains(string(tools), `"strict":true`) || !strings.Contains(string(tools), `"name":"exec_command"`) {
		t.Fatalf("tools %s", tools)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+sentinelKey {
		t.Fatalf("Authorization %q", got)
	}
	if r.Header.Get("OpenAI-Organization") != "org-test" || r.Header.Get("OpenAI-Project") != "proj-test" {
		t.Fatalf("org/project headers %v", r.Header)
	}
}

func TestResponsesFunctionCallRoundTrip(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(
		fakeopenai.Calls(fakeopenai.FunctionCall("call_1", "exec_command", `{"cmd":"ls data"}`)),
		fakeopenai.Text("There is one file."),
	)
	req := baseRequest()
	ev := &events{}
	resp := mustRespond(t, h, req, ev)
	calls := resp.FunctionCalls()
	if len(calls) != 1 || calls[0].CallID != "call_1" || calls[0].Name != "exec_command" || calls[0].Arguments != `{"cmd":"ls data"}` {
		t.Fatalf("calls %+v", calls)
	}
	if got := ev.toolCalls(); len(got) != 1 || got[0] != "exec_command/call_1" {
		t.Fatalf("tool call events %v", got)
	}
	req.Input = append(req.Input, resp.Output...)
	req.Input = append(req.Input, model.Item{Type: model.ItemFunctionCallOutput, CallID: "call_1", Output: "exit code 0\nsales.csv"})
	resp = mustRespond(t, h, req, nil)
	if resp.Text() != "There is one file." {
		t.Fatalf("text %q", resp.Text())
	}
	in := h.fake.Requests()[1].Input()
	if len(in) != 3 || in[1]["type"] != "function_call" || in[1]["call_id"] != "call_1" || in[1]["arguments"] != `{"cmd":"ls data"}` ||
		in[2]["type"] != "function_call_output" || in[2]["call_id"] != "call_1" || in[2]["output"] != "exit code 0\nsales.csv" {
		t.Fatalf("second input %v", in)
	}
}

func TestResponsesImageOutput(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Text("A red square."))
	req := baseRequest()
	req.Input = append(req.Input,
		model.Item{Type: model.ItemFunctionCall, CallID: "c1", Name: "view_image", Arguments: `{"path":"a.png"}`},
		model.Item{Type: model.ItemFunctionCallOutput, CallID: "c1", Images: []model.Image{{MediaType: "image/png", Data: []byte("\x89PNG fake"), Detail: "high"}}},
	)
	mustRespond(t, h, req, nil)
	in := h.fake.Requests()[0].Input()
	out, _ := json.Marshal(in[2]["output"])
	if !strings.Contains(string(out), `"type":"input_image"`) || !strings.Contains(string(out), `data:image/png;base64,`) || !strings.Contains(string(out), `"detail":"high"`) {
		t.Fatalf("function_call_output %s", out)
	}
}

func TestResponsesParallelCalls(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Calls(
		fakeopenai.FunctionCall("call_a", "exec_command", `{"cmd":"wc -l a.csv"}`),
		fakeopenai.FunctionCall("call_b", "exec_command", `{"cmd":"wc -l b.csv"}`),
		fakeopenai.FunctionCall("call_c", "view_image", `{"path":"c.png"}`),
	), fakeopenai.Text("done"))
	req := baseRequest()
	par := true
	req.Settings.ParallelToolCalls = &par
	ev := &events{}
	resp := mustRespond(t, h, req, ev)
	var ids []string
	for _, c := range resp.FunctionCalls() {
		ids = append(ids, c.CallID)
	}
	if strings.Join(ids, ",") != "call_a,call_b,call_c" {
		t.Fatalf("calls %v", ids)
	}
	if got := ev.toolCalls(); len(got) != 3 {
		t.Fatalf("tool call events %v", got)
	}
	if h.fake.Requests()[0].JSON["parallel_tool_calls"] != true {
		t.Fatal("parallel_tool_calls not sent")
	}
	req.Input = append(req.Input, resp.Output...)
	for _, id := range ids {
		req.Input = append(req.Input, model.Item{Type: model.ItemFunctionCallOutput, CallID: id, Output: "ok " + id})
	}
	mustRespond(t, h, req, nil)
	if n := len(h.fake.Requests()[1].Input()); n != 7 {
		t.Fatalf("second request has %d input items, want 7", n)
	}
}

func TestResponsesStructuredOutput(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.JSON(map[string]any{"quarter": "Q3", "revenue": 1200}))
	req := baseRequest()
	req.OutputSchema = json.RawMessage(`{"type":"object","properties":{"quarter":{"type":"string"},"revenue":{"type":"number"}},"required":["quarter","revenue"],"additionalProperties":false}`)
	req.OutputSchemaName = "sales report"
	resp := mustRespond(t, h, req, nil)
	var got struct {
		Quarter string
		Revenue float64
	}
	if err := json.Unmarshal([]byte(resp.Text()), &got); err != nil || got.Quarter != "Q3" || got.Revenue != 1200 {
		t.Fatalf("structured output %q: %v", resp.Text(), err)
	}
	format, _ := json.Marshal(h.fake.Requests()[0].JSON["text"])
	for _, want := range []string{`"type":"json_schema"`, `"strict":true`, `"name":"sales_report"`, `"required":["quarter","revenue"]`} {
		if !strings.Contains(string(format), want) {
			t.Errorf("text.format %s lacks %s", format, want)
		}
	}
}

func TestResponsesSettings(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Text("ok"))
	req := baseRequest()
	temp, topP, par := 0.2, 0.9, false
	req.Settings = model.Settings{ReasoningEffort: "high", ReasoningSummary: "auto", Verbosity: "low", Temperature: &temp, TopP: &topP,
		MaxOutputTokens: 2048, ParallelToolCalls: &par, ToolChoice: "exec_command"}
	mustRespond(t, h, req, nil)
	body := string(h.fake.Requests()[0].Body)
	for _, want := range []string{`"reasoning":{"effort":"high","summary":"auto"}`, `"temperature":0.2`, `"top_p":0.9`, `"max_output_tokens":2048`,
		`"parallel_tool_calls":false`, `"tool_choice":{"name":"exec_command","type":"function"}`, `"verbosity":"low"`} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %s\n%s", want, body)
		}
	}
}

func TestResponsesReasoningReplay(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(
		fakeopenai.Reply{
			Reasoning: &fakeopenai.Reasoning{ID: "rs_42", EncryptedContent: "gAAAA-encrypted", Summary: []string{"Listing the folder first."}},
			Calls:     []fakeopenai.Call{fakeopenai.FunctionCall("call_1", "exec_command", `{"cmd":"ls"}`)},
		},
		fakeopenai.Text("done"),
	)
	req := baseRequest()
	ev := &events{}
	resp := mustRespond(t, h, req, ev)
	if len(resp.Output) != 2 || resp.Output[0].Type != model.ItemReasoning || len(resp.Output[0].Raw) == 0 {
		t.Fatalf("output %+v", resp.Output)
	}
	var sawReasoning bool
	for _, e := range ev.evs {
		sawReasoning = sawReasoning || (e.Type == model.EventReasoning && e.Delta == "Listing the folder first.")
	}
	if !sawReasoning {
		t.Error("no reasoning summary delta streamed")
	}
	// The item survives a checkpoint round trip.
	saved, _ := json.Marshal(resp.Output)
	var restored []model.Item
	if err := json.Unmarshal(saved, &restored); err != nil {
		t.Fatal(err)
	}
	req.Input = append(req.Input, restored...)
	req.Input = append(req.Input, model.Item{Type: model.ItemFunctionCallOutput, CallID: "call_1", Output: "a.csv"})
	mustRespond(t, h, req, nil)
	in := h.fake.Requests()[1].Input()
	if in[1]["type"] != "reasoning" || in[1]["id"] != "rs_42" || in[1]["encrypted_content"] != "gAAAA-encrypted" {
		t.Fatalf("reasoning not replayed: %v", in[1])
	}
	if _, ok := in[1]["status"]; ok {
		t.Fatalf("output-only field replayed: %v", in[1])
	}
	if in[2]["type"] != "function_call" {
		t.Fatalf("order %v", in)
	}
}

func TestResponsesCompaction(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(
		fakeopenai.Reply{Compaction: &fakeopenai.Compaction{ID: "cmp_2", EncryptedContent: "newer-summary"}, Text: "continuing"},
		fakeopenai.Text("ok"),
	)
	req := baseRequest()
	req.Compaction = &model.Compaction{}
	req.Input = []model.Item{
		userMsg("very old"),
		{Type: model.ItemMessage, Role: "assistant", Text: "old answer"},
		{Type: model.ItemCompaction, Raw: json.RawMessage(`{"type":"compaction","id":"cmp_1","encrypted_content":"older-summary"}`)},
		userMsg("recent question"),
	}
	resp := mustRespond(t, h, req, nil)
	r := h.fake.Requests()[0]
	cm, _ := json.Marshal(r.JSON["context_management"])
	if string(cm) != `[{"compact_threshold":360000,"type":"compaction"}]` {
		t.Fatalf("context_management %s (gpt-5 has a 400,000-token window; threshold is 90%%)", cm)
	}
	in := r.Input()
	if len(in) != 2 || in[0]["type"] != "compaction" || in[0]["encrypted_content"] != "older-summary" || in[1]["content"] != "recent question" {
		t.Fatalf("input before the last compaction item not dropped: %v", in)
	}
	if resp.Output[0].Type != model.ItemCompaction || !strings.Contains(string(resp.Output[0].Raw), "newer-summary") {
		t.Fatalf("compaction output item %+v", resp.Output)
	}
	// The new compaction item supersedes the old one on the next turn.
	req.Input = append(req.Input, resp.Output...)
	req.Input = append(req.Input, userMsg("next"))
	req.Compaction = &model.Compaction{Threshold: 50_000}
	mustRespond(t, h, req, nil)
	r = h.fake.Requests()[1]
	in = r.Input()
	if len(in) != 3 || in[0]["encrypted_content"] != "newer-summary" {
		t.Fatalf("second input %v", in)
	}
	cm, _ = json.Marshal(r.JSON["context_management"])
	if string(cm) != `[{"compact_threshold":50000,"type":"compaction"}]` {
		t.Fatalf("configured threshold not sent: %s", cm)
	}
}

func TestCompactionThreshold(t *testing.T) {
	for _, tc := range []struct {
		model      string
		configured int64
		want       int64
	}{
		{"gpt-5", 0, 360_000},
		{"openai/GPT-4.1", 0, 942_818},
		{"o3", 0, 180_000},
		{"gpt-4o-mini", 0, 115_200},
		{"my-local-model", 0, 240_000},
		{"gpt-5", 100_000, 100_000},
	} {
		if got := openai.CompactionThreshold(tc.model, tc.configured); got != tc.want {
			t.Errorf("CompactionThreshold(%q, %d) = %d, want %d", tc.model, tc.configured, got, tc.want)
		}
	}
}

func TestResponsesMalformedArgumentsDeliveredAsIs(t *testing.T) {
	h := newHarness(t, "", nil)
	bad := `{"cmd": "ls", `
	h.fake.Enqueue(fakeopenai.Calls(fakeopenai.FunctionCall("call_1", "exec_command", bad)))
	resp := mustRespond(t, h, baseRequest(), nil)
	if calls := resp.FunctionCalls(); len(calls) != 1 || calls[0].Arguments != bad {
		t.Fatalf("calls %+v", calls)
	}
}

func TestResponses429RetryAfter(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Status(429, "Retry-After", "1"), fakeopenai.Text("after the limit"))
	resp := mustRespond(t, h, baseRequest(), nil)
	if resp.Text() != "after the limit" {
		t.Fatalf("text %q", resp.Text())
	}
	reqs := h.fake.Requests()
	if len(reqs) != 2 || reqs[0].Served != "status 429" || reqs[1].Served != "reply" {
		t.Fatalf("requests %v", served(reqs))
	}
	if got := h.log.saw("Retry-After"); len(got) != 1 || got[0] != "1" {
		t.Fatalf("client saw Retry-After %v", got)
	}
}

// A Retry-After beyond what the client will wait is honoured by not
// retrying early: the 429 comes back after one attempt.
func TestResponsesRetryAfterTooLongNotRetriedEarly(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Status(429, "Retry-After", "3600"), fakeopenai.Text("unused"))
	_, err := h.client.Respond(context.Background(), baseRequest(), nil)
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 429 || !e.Temporary() {
		t.Fatalf("got %v, want a temporary 429 error", err)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1 (no retry before Retry-After)", n)
	}
}

func TestResponses500ThenSuccess(t *testing.T) {
	h := newHarness(t, "", nil)
	// No Retry-After: the exponential backoff applies.
	h.fake.Enqueue(fakeopenai.Status(500), fakeopenai.Status(503), fakeopenai.Text("recovered"))
	resp := mustRespond(t, h, baseRequest(), nil)
	if resp.Text() != "recovered" {
		t.Fatalf("text %q", resp.Text())
	}
	if got := served(h.fake.Requests()); got != "status 500,status 503,reply" {
		t.Fatalf("requests %s", got)
	}
}

func TestResponsesTimeoutThenSuccess(t *testing.T) {
	h := newHarness(t, "", func(c *openai.Config) { c.Timeout = time.Second })
	h.fake.Enqueue(fakeopenai.Hang(), fakeopenai.Text("second try"))
	resp := mustRespond(t, h, baseRequest(), nil)
	if resp.Text() != "second try" {
		t.Fatalf("text %q", resp.Text())
	}
	if got := served(h.fake.Requests()); got != "hang,reply" {
		t.Fatalf("requests %s", got)
	}
}

func TestResponsesTruncatedStreamThenSuccess(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(
		fakeopenai.Reply{Text: "this answer is cut off", Fault: fakeopenai.Fault{Kind: fakeopenai.FaultTruncate, AfterEvents: 4}},
		fakeopenai.Text("complete answer"),
	)
	resp := mustRespond(t, h, baseRequest(), nil)
	if resp.Text() != "complete answer" {
		t.Fatalf("text %q", resp.Text())
	}
	if got := served(h.fake.Requests()); got != "truncated,reply" {
		t.Fatalf("requests %s", got)
	}
}

func TestResponsesPersistent500(t *testing.T) {
	h := newHarness(t, "", func(c *openai.Config) { c.MaxRetries = 2 })
	for range 3 {
		h.fake.Enqueue(fakeopenai.Reply{Fault: fakeopenai.Fault{Kind: fakeopenai.FaultStatus, Status: 500,
			Header: map[string]string{"Retry-After-Ms": "1"}, Message: "Incorrect API key provided: " + sentinelKey}})
	}
	_, err := h.client.Respond(context.Background(), baseRequest(), nil)
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %T %v, want *openai.Error", err, err)
	}
	if e.StatusCode != 500 || e.RequestID != "req_fake_3" || e.Attempts != 3 || !e.Temporary() {
		t.Fatalf("error %+v", e)
	}
	msg := err.Error()
	for _, want := range []string{"HTTP 500", "req_fake_3", "after 3 attempts", "gpt-5"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	assertNoKey(t, err)
	if n := len(h.fake.Requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

func TestResponsesConnectionRefusedNoKey(t *testing.T) {
	c, err := openai.New(openai.Config{APIKey: sentinelKey, BaseURL: "http://127.0.0.1:1/v1", MaxRetries: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Respond(context.Background(), baseRequest(), nil)
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 0 || !e.Temporary() {
		t.Fatalf("got %v", err)
	}
	// A connection failure is retried max_retries times, once each.
	if e.Attempts != 2 {
		t.Fatalf("%d attempts, want 2: %v", e.Attempts, err)
	}
	assertNoKey(t, err)
}

func TestResponses400NotRetried(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Reply{Fault: fakeopenai.Fault{Kind: fakeopenai.FaultStatus, Status: 400, Message: "Invalid schema for function 'exec_command'"}})
	_, err := h.client.Respond(context.Background(), baseRequest(), nil)
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 400 || e.Temporary() || !strings.Contains(err.Error(), "Invalid schema") {
		t.Fatalf("got %v", err)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestContextCanceledDuringHang(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Hang())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_ = h.fake.WaitInFlight(context.Background(), 1)
		cancel()
	}()
	_, err := h.client.Respond(ctx, baseRequest(), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d requests after cancel, want 1", n)
	}
}

func assertNoKey(t *testing.T, err error) {
	t.Helper()
	for _, s := range []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if strings.Contains(s, sentinelKey) || strings.Contains(s, "DO-NOT-LEAK") {
			t.Fatalf("error leaks the API key: %s", s)
		}
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.Contains(fmt.Sprintf("%#v", e), "DO-NOT-LEAK") {
			t.Fatalf("wrapped error %T leaks the API key", e)
		}
	}
}

func served(reqs []fakeopenai.Request) string {
	var s []string
	for _, r := range reqs {
		s = append(s, r.Served)
	}
	return strings.Join(s, ",")
}

// Four turns issued at once are served at once: the handler holds every
// answer until all four requests are in flight, and the request log shows
// pairwise overlapping intervals.
func TestConcurrentRequestsOverlap(t *testing.T) {
	if _, err := fakeopenai.LoadSpec(); err != nil { // before the clock starts
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 4
	var srv *fakeopenai.Server
	srv = fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		if err := srv.WaitInFlight(ctx, n); err != nil {
			t.Errorf("handler: %v", err)
		}
		return fakeopenai.Text(fmt.Sprintf("answer %d", r.Seq))
	}))
	c, err := openai.New(openai.Config{APIKey: sentinelKey, BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := baseRequest()
			req.Agent = fmt.Sprintf("tool-agent-%d", i)
			if _, err := c.Respond(ctx, req, nil); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != n || srv.MaxInFlight() != n {
		t.Fatalf("%d requests, max in flight %d", len(reqs), srv.MaxInFlight())
	}
	for i := range reqs {
		for j := i + 1; j < len(reqs); j++ {
			if !reqs[i].Overlaps(reqs[j]) {
				t.Errorf("requests %d and %d did not overlap", reqs[i].Seq, reqs[j].Seq)
			}
		}
	}
}

// Non-reasoning models reject the encrypted-reasoning include; the
// provider asks again without it and remembers that for the model.
func TestResponsesEncryptedReasoningRefused(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(
		fakeopenai.Reply{Fault: fakeopenai.Fault{Kind: fakeopenai.FaultStatus, Status: 400, Param: "include", Message: "Encrypted content is not supported with this model."}},
		fakeopenai.Text("first"),
		fakeopenai.Text("second"),
	)
	req := baseRequest()
	req.Model = "gpt-4o"
	if got := mustRespond(t, h, req, nil).Text(); got != "first" {
		t.Fatalf("text %q", got)
	}
	if got := mustRespond(t, h, req, nil).Text(); got != "second" {
		t.Fatalf("text %q", got)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, want := range []bool{true, false, false} {
		if _, has := reqs[i].JSON["include"]; has != want {
			t.Errorf("request %d: include present %v, want %v", i+1, has, want)
		}
	}
}

func TestConfigFromBlock(t *testing.T) {
	fake := fakeopenai.New(t)
	fake.Enqueue(fakeopenai.Text("via ollama"))
	cfg := (&openai.ProviderSettings{BaseURL: fake.URL, API: "chat_completions", Project: "p1"}).Config(
		openai.EnvLookup([]string{"OPENAI_API_KEY=" + sentinelKey, "OPENAI_BASE_URL=http://ignored.invalid/v1"}))
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.API() != openai.APIChatCompletions {
		t.Fatalf("api %q", c.API())
	}
	resp, err := c.Respond(context.Background(), baseRequest(), nil)
	if err != nil || resp.Text() != "via ollama" {
		t.Fatalf("%v %v", resp, err)
	}
	r := fake.Requests()[0]
	if r.Header.Get("OpenAI-Project") != "p1" || r.Header.Get("Authorization") != "Bearer "+sentinelKey {
		t.Fatalf("headers %v", r.Header)
	}
}
