package openai_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/openai"
)

// hostedTool decodes a tool block body (its arguments, type left out)
// for a provider with settings s.
func hostedTool(t *testing.T, s *openai.ProviderSettings, typ, src string) (model.HostedTool, hcl.Diagnostics) {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "tool.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return openai.DecodeHostedTool(s, typ, hcl.Range{Filename: "main.hcl"}, f.Body)
}

func mustHostedTool(t *testing.T, typ, src string) model.HostedTool {
	t.Helper()
	ht, diags := hostedTool(t, &openai.ProviderSettings{API: openai.APIResponses}, typ, src)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", typ, diags.Error())
	}
	return ht
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a any, b string) bool {
	t.Helper()
	ab, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var x, y any
	if err := json.Unmarshal(ab, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("want %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestResponsesHostedToolsRequest: the four hosted tools reach the
// Responses API request exactly as the API defines them (the fake checks
// the body against the vendored OpenAPI document), beside the function
// tools, and a tool_choice naming a hosted tool chooses it.
func TestResponsesHostedToolsRequest(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Text("ok"), fakeopenai.Text("ok"), fakeopenai.Text("ok"))
	req := baseRequest()
	req.HostedTools = []model.HostedTool{
		mustHostedTool(t, "web_search", `
search_context_size = "low"
allowed_domains     = ["pubmed.ncbi.nlm.nih.gov"]
user_location       = { country = "GB", city = "London" }
`),
		mustHostedTool(t, "file_search", `
vector_store_ids = ["vs_123", "vs_456"]
max_num_results  = 5
ranking_options  = { ranker = "auto", score_threshold = 0.5 }
`),
		mustHostedTool(t, "code_interpreter", `container = { file_ids = ["file-1"], memory_limit = "4g" }`),
		mustHostedTool(t, "image_generation", `
quality       = "low"
size          = "1024x1536"
output_format = "webp"
`),
	}
	req.Settings.ToolChoice = "file_search"
	mustRespond(t, h, req, nil)
	body := h.fake.Requests()[0].JSON
	tools, _ := body["tools"].([]any)
	want := []string{
		`{"type":"function","name":"exec_command","description":"Run a shell command.","strict":true,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"],"additionalProperties":false}}`,
		`{"type":"web_search","search_context_size":"low","filters":{"allowed_domains":["pubmed.ncbi.nlm.nih.gov"]},"user_location":{"type":"approximate","country":"GB","city":"London"}}`,
		`{"type":"file_search","vector_store_ids":["vs_123","vs_456"],"max_num_results":5,"ranking_options":{"ranker":"auto","score_threshold":0.5}}`,
		`{"type":"code_interpreter","container":{"type":"auto","file_ids":["file-1"],"memory_limit":"4g"}}`,
		`{"type":"image_generation","quality":"low","size":"1024x1536","output_format":"webp"}`,
	}
	if len(tools) != len(want) {
		t.Fatalf("tools %v", tools)
	}
	for i, w := range want {
		if !jsonEqual(t, tools[i], w) {
			got, _ := json.Marshal(tools[i])
			t.Errorf("tools[%d] = %s\nwant %s", i, got, w)
		}
	}
	if !jsonEqual(t, body["tool_choice"], `{"type":"file_search"}`) {
		t.Errorf("tool_choice %v", body["tool_choice"])
	}

	// Web search is chosen as the only tool allowed, and required; a
	// container id is sent as the id; a name that is no hosted tool of
	// the request is a function's.
	req.HostedTools = []model.HostedTool{
		mustHostedTool(t, "web_search", ``),
		mustHostedTool(t, "code_interpreter", `container = "cntr_abc"`),
	}
	req.Settings.ToolChoice = "web_search"
	mustRespond(t, h, req, nil)
	body = h.fake.Requests()[1].JSON
	if !jsonEqual(t, body["tool_choice"], `{"type":"allowed_tools","mode":"required","tools":[{"type":"web_search"}]}`) {
		t.Errorf("tool_choice %v", body["tool_choice"])
	}
	if tools, _ := body["tools"].([]any); len(tools) != 3 || !jsonEqual(t, tools[2], `{"type":"code_interpreter","container":"cntr_abc"}`) {
		t.Errorf("tools %v", body["tools"])
	}
	req.Settings.ToolChoice = "image_generation"
	mustRespond(t, h, req, nil)
	if tc := h.fake.Requests()[2].JSON["tool_choice"]; !jsonEqual(t, tc, `{"type":"function","name":"image_generation"}`) {
		t.Errorf("tool_choice without an image_generation tool: %v", tc)
	}
}

// TestResponsesHostedCallsRecordedAndReplayed: hosted tool calls in a
// response become hosted_tool_call items (not function calls to run)
// with an account of what they did, and are replayed to the service, as
// it sent them, in the next turn's input.
func TestResponsesHostedCallsRecordedAndReplayed(t *testing.T) {
	h := newHarness(t, "", nil)
	search := map[string]any{"type": "web_search_call", "id": "ws_1", "status": "completed",
		"action": map[string]any{"type": "search", "query": "agentctl releases"}}
	code := map[string]any{"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "container_id": "cntr_1",
		"code": "import math\nprint(math.pi)", "outputs": []any{map[string]any{"type": "logs", "logs": "3.14159"}}}
	files := map[string]any{"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": []any{"pricing"}}
	image := map[string]any{"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "aGVsbG8="}
	h.fake.Enqueue(fakeopenai.Reply{Hosted: []map[string]any{search, code, files, image}, Text: "Found it."}, fakeopenai.Text("ok"))
	req := baseRequest()
	req.HostedTools = []model.HostedTool{mustHostedTool(t, "web_search", ``)}
	resp := mustRespond(t, h, req, nil)
	if calls := resp.FunctionCalls(); len(calls) != 0 {
		t.Fatalf("hosted calls became function calls to run: %+v", calls)
	}
	wantText := []string{
		`web search "agentctl releases" (completed)`,
		`code interpreter: import math (+1 lines), 1 outputs (completed)`,
		`file search "pricing" (completed)`,
		`image generation, 8 bytes of base64 image (completed)`,
	}
	if len(resp.Output) != 5 {
		t.Fatalf("output %+v", resp.Output)
	}
	for i, w := range wantText {
		it := resp.Output[i]
		if it.Type != model.ItemHostedToolCall || it.Text != w || it.Agent != "analyst" || len(it.Raw) == 0 {
			t.Errorf("output[%d] = %+v, want a hosted call %q", i, it, w)
		}
	}
	if resp.Output[0].Name != "web_search_call" || resp.Output[0].CallID != "ws_1" {
		t.Errorf("output[0] %+v", resp.Output[0])
	}
	if resp.Text() != "Found it." {
		t.Errorf("text %q", resp.Text())
	}

	req.Input = append(append(req.Input, resp.Output...), userMsg("And then?"))
	mustRespond(t, h, req, nil)
	in := h.fake.Requests()[1].Input()
	if len(in) != 7 {
		t.Fatalf("input %v", in)
	}
	for i, want := range []map[string]any{search, code, files, image} {
		if !jsonEqual(t, in[1+i], mustJSON(t, want)) {
			t.Errorf("input[%d] = %v, want %v", 1+i, in[1+i], want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestResponsesModelSettings: every model setting reaches the Responses
// API request under its own field (checked against the OpenAPI document).
func TestResponsesModelSettings(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(fakeopenai.Text("ok"), fakeopenai.Text("ok"))
	req := baseRequest()
	store := true
	req.Settings = model.Settings{Truncation: "auto", Store: &store, Metadata: map[string]string{"team": "research"},
		PromptCacheRetention: "24h", PromptCacheMode: "explicit", PromptCacheTTL: "30m",
		Include: []string{"web_search_call.action.sources", "reasoning.encrypted_content"}}
	mustRespond(t, h, req, nil)
	body := h.fake.Requests()[0].JSON
	for field, want := range map[string]string{
		"truncation": `"auto"`, "store": `true`, "metadata": `{"team":"research"}`, "prompt_cache_retention": `"24h"`,
		"prompt_cache_options": `{"mode":"explicit","ttl":"30m"}`,
		"include":              `["reasoning.encrypted_content","web_search_call.action.sources"]`,
	} {
		if !jsonEqual(t, body[field], want) {
			got, _ := json.Marshal(body[field])
			t.Errorf("%s = %s, want %s", field, got, want)
		}
	}
	// A setting the Responses API does not accept is refused before any
	// request.
	pen := 0.5
	req.Settings = model.Settings{FrequencyPenalty: &pen}
	_, err := h.client.Respond(context.Background(), req, nil)
	if err == nil || !strings.Contains(err.Error(), "frequency_penalty") {
		t.Fatalf("got %v, want frequency_penalty refused", err)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d requests; the refused one was sent", n)
	}
}

// TestChatModelSettings: the settings Chat Completions accepts reach its
// request; the Responses API's settings and hosted tools are refused
// before any request.
func TestChatModelSettings(t *testing.T) {
	h := newHarness(t, openai.APIChatCompletions, nil)
	h.fake.Enqueue(fakeopenai.Text("ok"))
	req := baseRequest()
	store, freq, pres := false, 0.25, -0.5
	req.Settings = model.Settings{FrequencyPenalty: &freq, PresencePenalty: &pres, Store: &store,
		Metadata: map[string]string{"run": "r1"}, PromptCacheRetention: "in_memory", PromptCacheTTL: "30m"}
	mustRespond(t, h, req, nil)
	body := h.fake.Requests()[0].JSON
	for field, want := range map[string]string{
		"frequency_penalty": `0.25`, "presence_penalty": `-0.5`, "store": `false`, "metadata": `{"run":"r1"}`,
		"prompt_cache_retention": `"in_memory"`, "prompt_cache_options": `{"ttl":"30m"}`,
	} {
		if !jsonEqual(t, body[field], want) {
			got, _ := json.Marshal(body[field])
			t.Errorf("%s = %s, want %s", field, got, want)
		}
	}
	for _, tc := range []struct {
		name string
		mod  func(*model.Request)
	}{
		{"truncation", func(r *model.Request) { r.Settings = model.Settings{Truncation: "auto"} }},
		{"reasoning_summary", func(r *model.Request) { r.Settings = model.Settings{ReasoningSummary: "auto"} }},
		{"include", func(r *model.Request) { r.Settings = model.Settings{Include: []string{"file_search_call.results"}} }},
		{"web_search", func(r *model.Request) {
			r.Settings = model.Settings{}
			r.HostedTools = []model.HostedTool{{Type: "web_search", Config: json.RawMessage(`{"type":"web_search"}`)}}
		}},
	} {
		r := baseRequest()
		tc.mod(r)
		_, err := h.client.Respond(context.Background(), r, nil)
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: got %v, want it refused", tc.name, err)
		}
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d requests; a refused one was sent", n)
	}
}

// TestDecodeHostedToolDiagnostics: a hosted tool on Chat Completions and
// bad arguments are reported where they are written.
func TestDecodeHostedToolDiagnostics(t *testing.T) {
	responses := &openai.ProviderSettings{API: openai.APIResponses}
	for _, tc := range []struct {
		settings  *openai.ProviderSettings
		typ, src  string
		wantLine  int
		wantWords string
	}{
		{&openai.ProviderSettings{API: openai.APIChatCompletions}, "web_search", ``, 0, `Chat Completions (api = "chat_completions")`},
		{responses, "web_serch", ``, 0, `Did you mean "web_search"?`},
		{responses, "file_search", `max_num_results = 5`, 1, `"vector_store_ids" is required`},
		{responses, "file_search", "vector_store_ids = []", 1, "at least one vector store"},
		{responses, "file_search", "vector_store_ids = [\"vs\"]\nmax_num_results = 51", 2, "from 1 to 50"},
		{responses, "web_search", "\nsearch_context_size = \"huge\"", 2, `"low", "medium", "high"`},
		{responses, "web_search", `user_location = { country = "Britain" }`, 1, "two-letter ISO country code"},
		{responses, "web_search", `user_location = { town = "Leeds" }`, 1, `no "town"`},
		{responses, "code_interpreter", `container = { memory_limit = "2g" }`, 1, `"1g", "4g", "16g", "64g"`},
		{responses, "image_generation", `size = "big"`, 1, "WIDTHxHEIGHT"},
		{responses, "image_generation", `needs_approval = true`, 1, `An argument named "needs_approval" is not expected here`},
	} {
		_, diags := hostedTool(t, tc.settings, tc.typ, tc.src)
		if !diags.HasErrors() {
			t.Errorf("%s %q: no error", tc.typ, tc.src)
			continue
		}
		d := diags[0]
		if !strings.Contains(d.Summary+" "+d.Detail, tc.wantWords) || d.Subject == nil || d.Subject.Start.Line != tc.wantLine {
			t.Errorf("%s %q: %s at %v; want %q at line %d", tc.typ, tc.src, diags.Error(), d.Subject, tc.wantWords, tc.wantLine)
		}
	}
}

func TestUnsupportedSetting(t *testing.T) {
	chat := &openai.ProviderSettings{API: openai.APIChatCompletions}
	resp := &openai.ProviderSettings{API: openai.APIResponses}
	for name, want := range map[string][2]bool{
		// refused by chat, refused by responses
		"truncation": {true, false}, "include": {true, false}, "reasoning_summary": {true, false},
		"frequency_penalty": {false, true}, "presence_penalty": {false, true},
		"store": {false, false}, "metadata": {false, false}, "temperature": {false, false}, "tool_choice": {false, false},
	} {
		if got := chat.UnsupportedSetting(name) != ""; got != want[0] {
			t.Errorf("chat completions %s: refused %v", name, got)
		}
		if got := resp.UnsupportedSetting(name) != ""; got != want[1] {
			t.Errorf("responses %s: refused %v", name, got)
		}
	}
}

// TestModelUnavailable: the errors after which model_fallback tries the
// next model, and those after which it does not.
func TestModelUnavailable(t *testing.T) {
	for _, tc := range []struct {
		reply fakeopenai.Reply
		want  bool
	}{
		{fakeopenai.Status(503), true},
		{fakeopenai.Status(500), true},
		{fakeopenai.Status(429), true},
		{fakeopenai.Reply{Fault: fakeopenai.Fault{Kind: fakeopenai.FaultStatus, Status: 404, Code: "model_not_found", Message: "The model does not exist"}}, true},
		{fakeopenai.Reply{Fault: fakeopenai.Fault{Kind: fakeopenai.FaultStatus, Status: 400, Code: "model_not_found"}}, true},
		{fakeopenai.Status(400), false},
		{fakeopenai.Status(401), false},
		{fakeopenai.Status(403), false},
	} {
		h := newHarness(t, "", func(c *openai.Config) { c.MaxRetries = openai.NoRetries })
		h.fake.Enqueue(tc.reply)
		_, err := h.client.Respond(context.Background(), baseRequest(), nil)
		if err == nil {
			t.Fatalf("status %d: no error", tc.reply.Fault.Status)
		}
		if got := model.IsUnavailable(err); got != tc.want {
			t.Errorf("status %d code %q: unavailable %v, want %v (%v)", tc.reply.Fault.Status, tc.reply.Fault.Code, got, tc.want, err)
		}
	}
}
