package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/openai"
)

const chat = openai.APIChatCompletions

func TestChatText(t *testing.T) {
	h := newHarness(t, chat, nil)
	h.fake.Enqueue(fakeopenai.Reply{Text: "Q3 had the highest revenue.", Usage: fakeopenai.Usage{InputTokens: 50, OutputTokens: 7, CachedTokens: 32, ReasoningTokens: 2}})
	ev := &events{}
	resp := mustRespond(t, h, baseRequest(), ev)
	if resp.Text() != "Q3 had the highest revenue." || ev.text() != resp.Text() {
		t.Fatalf("text %q, streamed %q", resp.Text(), ev.text())
	}
	if want := (model.Usage{InputTokens: 50, OutputTokens: 7, CachedTokens: 32, ReasoningTokens: 2}); resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
	r := h.fake.Requests()[0]
	if r.Path != "/v1/chat/completions" || !r.Stream {
		t.Fatalf("request %s stream=%v", r.Path, r.Stream)
	}
	msgs := r.Input()
	if len(msgs) != 2 || msgs[0]["role"] != "system" || msgs[0]["content"] != "You are an analyst." || msgs[1]["role"] != "user" {
		t.Fatalf("messages %v", msgs)
	}
	so, _ := json.Marshal(r.JSON["stream_options"])
	if string(so) != `{"include_usage":true}` {
		t.Fatalf("stream_options %s", so)
	}
}

func TestChatParallelCallsRoundTrip(t *testing.T) {
	h := newHarness(t, chat, nil)
	h.fake.Enqueue(
		fakeopenai.Reply{Text: "Let me look.", Calls: []fakeopenai.Call{
			fakeopenai.FunctionCall("call_a", "exec_command", `{"cmd":"ls a"}`),
			fakeopenai.FunctionCall("call_b", "view_image", `{"path":"b.png"}`),
		}},
		fakeopenai.Text("Two things."),
	)
	req := baseRequest()
	ev := &events{}
	resp := mustRespond(t, h, req, ev)
	calls := resp.FunctionCalls()
	if len(calls) != 2 || calls[0].CallID != "call_a" || calls[0].Arguments != `{"cmd":"ls a"}` || calls[1].Name != "view_image" || calls[1].Arguments != `{"path":"b.png"}` {
		t.Fatalf("calls %+v", calls)
	}
	if got := ev.toolCalls(); strings.Join(got, ",") != "exec_command/call_a,view_image/call_b" {
		t.Fatalf("tool call events %v", got)
	}
	req.Input = append(req.Input, resp.Output...)
	req.Input = append(req.Input,
		model.Item{Type: model.ItemFunctionCallOutput, CallID: "call_a", Output: "a.csv"},
		model.Item{Type: model.ItemFunctionCallOutput, CallID: "call_b", Images: []model.Image{{MediaType: "image/png", Data: []byte("png")}}},
	)
	resp = mustRespond(t, h, req, nil)
	if resp.Text() != "Two things." {
		t.Fatalf("text %q", resp.Text())
	}
	msgs := h.fake.Requests()[1].Input()
	// system, user, assistant(text + 2 tool_calls), tool, tool, user(image)
	if len(msgs) != 6 {
		t.Fatalf("%d messages: %v", len(msgs), msgs)
	}
	asst, _ := json.Marshal(msgs[2])
	if msgs[2]["role"] != "assistant" || msgs[2]["content"] != "Let me look." || strings.Count(string(asst), `"type":"function"`) != 2 {
		t.Fatalf("assistant message %s", asst)
	}
	if msgs[3]["role"] != "tool" || msgs[3]["tool_call_id"] != "call_a" || msgs[4]["tool_call_id"] != "call_b" {
		t.Fatalf("tool messages %v %v", msgs[3], msgs[4])
	}
	img, _ := json.Marshal(msgs[5])
	if msgs[5]["role"] != "user" || !strings.Contains(string(img), "data:image/png;base64,") {
		t.Fatalf("image message %s", img)
	}
}

func TestChatStructuredOutput(t *testing.T) {
	h := newHarness(t, chat, nil)
	h.fake.Enqueue(fakeopenai.JSON(map[string]any{"answer": 42}))
	req := baseRequest()
	req.OutputSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"],"additionalProperties":false}`)
	req.OutputSchemaName = "answer"
	temp := 0.0
	req.Settings = model.Settings{Temperature: &temp, MaxOutputTokens: 100, ToolChoice: "required", ReasoningEffort: "low"}
	resp := mustRespond(t, h, req, nil)
	if resp.Text() != `{"answer":42}` {
		t.Fatalf("text %q", resp.Text())
	}
	body := string(h.fake.Requests()[0].Body)
	for _, want := range []string{`"response_format":{"json_schema":{"name":"answer","strict":true,"schema":`, `"type":"json_schema"`,
		`"max_completion_tokens":100`, `"tool_choice":"required"`, `"reasoning_effort":"low"`, `"temperature":0`} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %s\n%s", want, body)
		}
	}
}

func TestChatMalformedArgumentsDeliveredAsIs(t *testing.T) {
	h := newHarness(t, chat, nil)
	bad := `{"cmd": ls}`
	h.fake.Enqueue(fakeopenai.Calls(fakeopenai.FunctionCall("call_1", "exec_command", bad)))
	resp := mustRespond(t, h, baseRequest(), nil)
	if calls := resp.FunctionCalls(); len(calls) != 1 || calls[0].Arguments != bad {
		t.Fatalf("calls %+v", calls)
	}
}

func TestChatFaultsThenSuccess(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault fakeopenai.Reply
		want  string
	}{
		{"429", fakeopenai.Status(429, "retry-after-ms", "10"), "status 429"},
		{"500", fakeopenai.Status(500, "Retry-After-Ms", "1"), "status 500"},
		{"hang", fakeopenai.Hang(), "hang"},
		{"truncated", fakeopenai.Reply{Text: "cut off here", Fault: fakeopenai.Fault{Kind: fakeopenai.FaultTruncate, AfterEvents: 2}}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, chat, func(c *openai.Config) { c.Timeout = time.Second })
			h.fake.Enqueue(tc.fault, fakeopenai.Text("fine"))
			resp := mustRespond(t, h, baseRequest(), nil)
			if resp.Text() != "fine" {
				t.Fatalf("text %q", resp.Text())
			}
			if got := served(h.fake.Requests()); got != tc.want+",reply" {
				t.Fatalf("served %s", got)
			}
		})
	}
}

func TestChatPersistent503NoKey(t *testing.T) {
	h := newHarness(t, chat, func(c *openai.Config) { c.MaxRetries = 1 })
	h.fake.Enqueue(
		fakeopenai.Status(503, "Retry-After-Ms", "1"),
		fakeopenai.Reply{Fault: fakeopenai.Fault{Kind: fakeopenai.FaultStatus, Status: 503, Message: "overloaded; key " + sentinelKey}},
	)
	_, err := h.client.Respond(context.Background(), baseRequest(), nil)
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 503 || e.Attempts != 2 || e.RequestID != "req_fake_2" {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "chat completions") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("error %q", err)
	}
	assertNoKey(t, err)
}
