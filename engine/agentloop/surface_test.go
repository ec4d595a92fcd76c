package agentloop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/model"
)

// spanAttrs are a span's attributes as text.
func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	return attrs
}

// TestModelFallback: the agent's model answers 503 after the provider's
// retries, so its first fallback model is asked and answers. The
// journal, the events and the trace name the model that answered and why
// the one before did not.
func TestModelFallback(t *testing.T) {
	for _, status := range []int{503, 429} {
		srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
			if r.JSON["model"] == "gpt-main" {
				return fakeopenai.Status(status)
			}
			return fakeopenai.Text("answered by " + r.JSON["model"].(string))
		}))
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		journal := &steps{}
		var events []agentloop.Event
		r := &agentloop.Runner{
			Agents: map[string]*agentloop.Agent{"a": {Name: "a", Model: newClient(t, srv, "responses"), ModelName: "gpt-main",
				ModelFallback: []string{"gpt-backup", "gpt-last"}, Instructions: "agent a"}},
			Checkpoint: journal.add, Tracer: tp.Tracer("test"),
			Events: func(e agentloop.Event) { events = append(events, e) },
		}
		res, err := r.Run(context.Background(), "a", "go", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := finalText(t, res); got != "answered by gpt-backup" {
			t.Fatalf("%d: output %q", status, got)
		}
		var models []string
		for _, req := range srv.Requests() {
			models = append(models, req.JSON["model"].(string))
		}
		// The provider's 3 retries of the agent's model, then its first
		// fallback; the last is never asked.
		if want := "gpt-main gpt-main gpt-main gpt-main gpt-backup"; strings.Join(models, " ") != want {
			t.Fatalf("%d: models asked %q, want %q", status, models, want)
		}
		resp := journal.s[1].Response
		if resp.Model != "gpt-backup" || len(resp.Fallbacks) != 1 || !strings.HasPrefix(resp.Fallbacks[0], "gpt-main: ") ||
			!strings.Contains(resp.Fallbacks[0], "HTTP "+itoa(status)) {
			t.Fatalf("%d: journal records model %q, fallbacks %q", status, resp.Model, resp.Fallbacks)
		}
		notice := ""
		for _, e := range events {
			if e.Type == agentloop.EventRetry && strings.Contains(e.Text, "falling back") {
				notice = e.Text
			}
		}
		if !strings.HasPrefix(notice, "model gpt-main unavailable, falling back to gpt-backup: openai responses API, model \"gpt-main\": HTTP ") {
			t.Fatalf("%d: fallback notice %q", status, notice)
		}
		var chats []string
		for _, s := range rec.Ended() {
			if !strings.HasPrefix(s.Name(), "chat ") {
				continue
			}
			a := spanAttrs(s)
			chats = append(chats, s.Name()+" "+a["gen_ai.response.model"]+" "+a["agentctl.model_fallback"]+" "+a["error.type"])
		}
		if want := "chat gpt-main   model_unavailable,chat gpt-backup gpt-backup true "; strings.Join(chats, ",") != want {
			t.Fatalf("%d: chat spans %q, want %q", status, strings.Join(chats, ","), want)
		}
		assertValid(t, srv)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestModelFallbackNotOnBadRequest: an error another model would not fix
// (a 400) fails the turn without asking the fallback models; every
// fallback unavailable fails it naming each.
func TestModelFallbackNotOnBadRequest(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		if r.JSON["model"] == "gpt-main" {
			return fakeopenai.Status(400)
		}
		return fakeopenai.Status(503)
	}))
	agent := &agentloop.Agent{Name: "a", Model: newClient(t, srv, "responses"), ModelName: "gpt-main", ModelFallback: []string{"gpt-backup"}}
	r := &agentloop.Runner{Agents: map[string]*agentloop.Agent{"a": agent}}
	if _, err := r.Run(context.Background(), "a", "go", nil); err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("got %v, want the 400", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests; a 400 was followed by a fallback", n)
	}
	agent.ModelName = "gpt-other"
	_, err := r.Run(context.Background(), "a", "go", nil)
	if err == nil || !strings.Contains(err.Error(), "every model was unavailable (gpt-other: ") || !strings.Contains(err.Error(), `model "gpt-backup": HTTP 503`) {
		t.Fatalf("got %v, want both models named", err)
	}
}

// TestHostedToolCallsRecordedNotRun: the agent's hosted tools are offered
// to the model; the hosted calls it made are checkpointed with its
// response and announced, and nothing runs them here: the turn that made
// them is the final one.
func TestHostedToolCallsRecordedNotRun(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(fakeopenai.Reply{Hosted: []map[string]any{{"type": "web_search_call", "id": "ws_1", "status": "completed",
		"action": map[string]any{"type": "search", "query": "go 1.26 release notes"}}}, Text: "Go 1.26 is out."})
	journal := &steps{}
	var hosted []agentloop.Event
	r := &agentloop.Runner{
		Agents: map[string]*agentloop.Agent{"a": {Name: "a", Model: newClient(t, srv, "responses"), ModelName: "gpt-test",
			HostedTools: []model.HostedTool{{Type: "web_search", Config: json.RawMessage(`{"type":"web_search"}`)}}}},
		Checkpoint: journal.add,
		Events: func(e agentloop.Event) {
			if e.Type == agentloop.EventHostedToolCall {
				hosted = append(hosted, e)
			}
		},
	}
	res, err := r.Run(context.Background(), "a", "what's new?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if finalText(t, res) != "Go 1.26 is out." || res.Turns != 1 {
		t.Fatalf("output %s after %d turns", res.Output, res.Turns)
	}
	if tools, _ := json.Marshal(srv.Requests()[0].JSON["tools"]); string(tools) != `[{"type":"web_search"}]` {
		t.Fatalf("tools %s", tools)
	}
	item := journal.s[1].Response.Output[0]
	if item.Type != model.ItemHostedToolCall || item.Name != "web_search_call" || item.Agent != "a" || len(journal.s) != 2 {
		t.Fatalf("journal %+v", journal.s)
	}
	if len(hosted) != 1 || hosted[0].Text != `web search "go 1.26 release notes" (completed)` {
		t.Fatalf("hosted events %+v", hosted)
	}
	transcript, err := agentloop.Transcript(journal.s)
	if err != nil || len(transcript) != 3 || transcript[1].Type != model.ItemHostedToolCall {
		t.Fatalf("transcript %+v, %v", transcript, err)
	}
}

// TestHandoffInputFilter: the agent handed to is given the conversation
// its handoff's input_filter leaves: without tool calls, or its last
// items with the call of every output kept. A resumed run, and the
// transcript, filter as the run did.
func TestHandoffInputFilter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter agentloop.InputFilter
		want   []string // the item types the writer's first request carries
	}{
		{"remove tool calls", agentloop.InputFilter{RemoveToolCalls: true}, []string{"user:research pricing", "assistant:Looked it up."}},
		{"keep last 3", agentloop.InputFilter{KeepLast: 3}, []string{"function_call:c2", "function_call:h1", "function_call_output:c2", "function_call_output:h1"}},
		{"both", agentloop.InputFilter{RemoveToolCalls: true, KeepLast: 1}, []string{"assistant:Looked it up."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
				switch {
				case strings.Contains(instructions(r), "writer"):
					return fakeopenai.Text("written")
				case len(outputs(r)) == 0:
					return fakeopenai.Calls(fakeopenai.FunctionCall("c1", "lookup", `{"n":1}`))
				}
				return fakeopenai.Reply{Text: "Looked it up.", Calls: []fakeopenai.Call{
					fakeopenai.FunctionCall("c2", "lookup", `{"n":2}`), fakeopenai.FunctionCall("h1", "transfer_to_writer", `{}`)}}
			}))
			m := newClient(t, srv, "responses")
			filter := tc.filter
			lookup := goTool{name: "lookup", fn: func(context.Context, string) (string, error) { return "42", nil }}
			agents := map[string]*agentloop.Agent{
				"analyst": {Name: "analyst", Model: m, ModelName: "gpt-test", Instructions: "analyst", Tools: []tools.Tool{lookup},
					Handoffs: []agentloop.Handoff{{Agent: "writer", InputFilter: &filter}}},
				"writer": {Name: "writer", Model: m, ModelName: "gpt-test", Instructions: "writer"},
			}
			journal := &steps{}
			res, err := (&agentloop.Runner{Agents: agents, Checkpoint: journal.add}).Run(context.Background(), "analyst", "research pricing", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Agent != "writer" || finalText(t, res) != "written" {
				t.Fatalf("%s: %s", res.Agent, res.Output)
			}
			reqs := srv.Requests()
			if got := itemList(reqs[len(reqs)-1].Input()); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("the writer was given %q, want %q", got, tc.want)
			}
			assertValid(t, srv)

			// The transcript, which knows no agents, filters as the run
			// did; a run resumed from the journal before the writer
			// answered gives the writer the same input.
			transcript, err := agentloop.Transcript(journal.s[:len(journal.s)-1])
			if err != nil || len(transcript) != len(tc.want) {
				t.Fatalf("transcript %+v, %v", transcript, err)
			}
			_, err = (&agentloop.Runner{Agents: agents, Checkpoint: journal.add}).Run(context.Background(), "analyst", "research pricing", journal.s[:len(journal.s)-1])
			if err != nil {
				t.Fatal(err)
			}
			reqs = srv.Requests()
			if got := itemList(reqs[len(reqs)-1].Input()); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("resumed, the writer was given %q, want %q", got, tc.want)
			}
		})
	}
}

// itemList describes Responses input items: role:text for messages,
// type:call_id for calls and outputs.
func itemList(in []map[string]any) []string {
	var out []string
	for _, it := range in {
		switch it["type"] {
		case "function_call", "function_call_output":
			out = append(out, it["type"].(string)+":"+it["call_id"].(string))
		default:
			text, _ := it["content"].(string)
			out = append(out, it["role"].(string)+":"+text)
		}
	}
	return out
}
