package agentloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/openai"
)

// These tests run the turn loop through the real openai-go client against
// the in-process fake of the OpenAI API, which checks every request
// against the official OpenAPI document.

const testKey = "sk-test-not-a-real-key"

type goTool struct {
	name string
	fn   func(ctx context.Context, args string) (string, error)
}

func (t goTool) Definition() model.Tool {
	return model.Tool{Name: t.name, Description: "test tool " + t.name,
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}`)}
}

func (t goTool) Call(ctx context.Context, args string) (tools.Output, error) {
	s, err := t.fn(ctx, args)
	return tools.Output{Text: s}, err
}

func newClient(t *testing.T, srv *fakeopenai.Server, api string) model.Model {
	t.Helper()
	c, err := openai.New(openai.Config{APIKey: testKey, BaseURL: srv.URL, API: api, MaxRetries: 3, Timeout: 5 * time.Second, RetryBaseDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// outputs counts the function_call_output items of a recorded request.
func outputs(r fakeopenai.Request) []map[string]any {
	var outs []map[string]any
	for _, it := range r.Input() {
		if it["type"] == "function_call_output" || it["role"] == "tool" {
			outs = append(outs, it)
		}
	}
	return outs
}

func instructions(r fakeopenai.Request) string {
	if s, ok := r.JSON["instructions"].(string); ok {
		return s
	}
	for _, m := range r.Input() {
		if m["role"] == "system" || m["role"] == "developer" {
			if s, ok := m["content"].(string); ok {
				return s
			}
		}
	}
	return ""
}

type steps struct {
	mu sync.Mutex
	s  []agentloop.Step
}

func (s *steps) add(_ context.Context, st agentloop.Step) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	var back agentloop.Step
	if err := json.Unmarshal(b, &back); err != nil {
		return err
	}
	s.s = append(s.s, back)
	return nil
}

func finalText(t *testing.T, res *agentloop.Result) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(res.Output, &s); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return s
}

func assertValid(t *testing.T, srv *fakeopenai.Server) {
	t.Helper()
	for _, r := range srv.Requests() {
		if r.Invalid != nil {
			t.Fatalf("request %d does not conform to the OpenAPI document: %v", r.Seq, r.Invalid)
		}
	}
}

func TestOpenAIToolLoopAndParallelCalls(t *testing.T) {
	for _, api := range []string{"responses", "chat_completions"} {
		t.Run(api, func(t *testing.T) {
			srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
				switch len(outputs(r)) {
				case 0:
					return fakeopenai.Calls(fakeopenai.FunctionCall("c1", "meet", `{"n":1}`))
				case 1:
					return fakeopenai.Calls(
						fakeopenai.FunctionCall("c2", "meet", `{"n":2}`),
						fakeopenai.FunctionCall("c3", "meet", `{"n":3}`),
						fakeopenai.FunctionCall("c4", "meet", `{"n":4}`))
				}
				return fakeopenai.Text("all met")
			}))
			// Calls 2-4 come in one response and must run at the same time:
			// each waits for the other two.
			var wg sync.WaitGroup
			wg.Add(3)
			first := true
			var mu sync.Mutex
			meet := goTool{name: "meet", fn: func(ctx context.Context, args string) (string, error) {
				mu.Lock()
				if first {
					first = false
					mu.Unlock()
					return "met alone", nil
				}
				mu.Unlock()
				wg.Done()
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				select {
				case <-done:
					return "met " + args, nil
				case <-time.After(20 * time.Second):
					return "", errors.New("parallel calls did not run concurrently")
				}
			}}
			rec := &steps{}
			r := &agentloop.Runner{
				Agents:     map[string]*agentloop.Agent{"a": {Name: "a", Model: newClient(t, srv, api), ModelName: "gpt-test", Instructions: "agent a", Tools: []tools.Tool{meet}}},
				Checkpoint: rec.add,
			}
			res, err := r.Run(context.Background(), "a", "meet everyone", nil)
			if err != nil {
				t.Fatal(err)
			}
			if finalText(t, res) != "all met" || res.Turns != 3 {
				t.Fatalf("output %s after %d turns", res.Output, res.Turns)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests", len(reqs))
			}
			if n := len(outputs(reqs[2])); n != 4 {
				t.Fatalf("last request carries %d tool outputs, want 4", n)
			}
			assertValid(t, srv)
		})
	}
}

func TestOpenAICircularHandoffEnds(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		ins, outs := instructions(r), len(outputs(r))
		switch {
		case strings.Contains(ins, "analyst") && outs == 0:
			return fakeopenai.Calls(fakeopenai.FunctionCall("h1", "transfer_to_copywriter", `{}`))
		case strings.Contains(ins, "copywriter"):
			return fakeopenai.Calls(fakeopenai.FunctionCall("h2", "transfer_to_analyst", `{}`))
		}
		return fakeopenai.Text("back to the analyst, done")
	}))
	m := newClient(t, srv, "responses")
	r := &agentloop.Runner{Agents: map[string]*agentloop.Agent{
		"analyst":    {Name: "analyst", Model: m, ModelName: "gpt-test", Instructions: "You are the analyst.", Handoffs: []agentloop.Handoff{{Agent: "copywriter"}}},
		"copywriter": {Name: "copywriter", Model: m, ModelName: "gpt-test", Instructions: "You are the copywriter.", Handoffs: []agentloop.Handoff{{Agent: "analyst"}}},
	}}
	res, err := r.Run(context.Background(), "analyst", "write it", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Agent != "analyst" || finalText(t, res) != "back to the analyst, done" {
		t.Fatalf("%s: %s", res.Agent, res.Output)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || !strings.Contains(instructions(reqs[1]), "copywriter") {
		t.Fatalf("%d requests; second instructions %q", len(reqs), instructions(reqs[1]))
	}
	// The copywriter sees the whole conversation, the handoff included.
	if n := len(outputs(reqs[1])); n != 1 {
		t.Fatalf("copywriter saw %d tool outputs", n)
	}
	assertValid(t, srv)
}

func TestOpenAIFourAgentToolsRunConcurrently(t *testing.T) {
	if _, err := fakeopenai.LoadSpec(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var srv *fakeopenai.Server
	srv = fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		if strings.Contains(instructions(r), "lead") {
			if len(outputs(r)) == 0 {
				var calls []fakeopenai.Call
				for i, topic := range []string{"pricing", "rollout", "legal", "support"} {
					calls = append(calls, fakeopenai.FunctionCall(fmt.Sprintf("r%d", i), "review", fmt.Sprintf(`{"input":%q}`, topic)))
				}
				return fakeopenai.Calls(calls...)
			}
			return fakeopenai.Text("four reviews in")
		}
		// A reviewer: wait until all four reviewers are in flight at once.
		if err := srv.WaitInFlight(ctx, 4); err != nil {
			t.Errorf("reviewers never overlapped: %v", err)
		}
		return fakeopenai.JSON(map[string]any{"verdict": "ok"})
	}))
	m := newClient(t, srv, "responses")
	schema := json.RawMessage(`{"type":"object","properties":{"verdict":{"type":"string"}},"required":["verdict"],"additionalProperties":false}`)
	rec := &steps{}
	r := &agentloop.Runner{
		Agents: map[string]*agentloop.Agent{
			"lead":     {Name: "lead", Model: m, ModelName: "gpt-test", Instructions: "You are the lead.", AgentTools: []agentloop.AgentTool{{Name: "review", Agent: "reviewer", Description: "Review one topic."}}},
			"reviewer": {Name: "reviewer", Model: m, ModelName: "gpt-test", Instructions: "You review.", OutputSchema: schema},
		},
		Checkpoint: rec.add,
	}
	res, err := r.Run(ctx, "lead", "review all four", nil)
	if err != nil {
		t.Fatal(err)
	}
	if finalText(t, res) != "four reviews in" {
		t.Fatalf("output %s", res.Output)
	}
	var reviewers []fakeopenai.Request
	for _, q := range srv.Requests() {
		if strings.Contains(instructions(q), "You review.") {
			reviewers = append(reviewers, q)
			// Structured output is asked for as a strict json_schema.
			format, _ := q.JSON["text"].(map[string]any)["format"].(map[string]any)
			if format["type"] != "json_schema" || format["strict"] != true {
				t.Fatalf("reviewer request text.format = %v", format)
			}
		}
	}
	if len(reviewers) != 4 {
		t.Fatalf("%d reviewer requests", len(reviewers))
	}
	for i := range reviewers {
		for j := i + 1; j < len(reviewers); j++ {
			if !reviewers[i].Overlaps(reviewers[j]) {
				t.Fatalf("reviewer requests %d and %d did not overlap", reviewers[i].Seq, reviewers[j].Seq)
			}
		}
	}
	// The structured outputs came back to the lead as JSON.
	n := 0
	for _, s := range rec.s {
		if s.Kind == agentloop.StepTool && s.Path == "" {
			n++
			if s.Result.Output != `{"verdict":"ok"}` {
				t.Fatalf("agent tool output %q", s.Result.Output)
			}
		}
	}
	if n != 4 {
		t.Fatalf("%d agent tool results", n)
	}
	assertValid(t, srv)
}

func TestOpenAIMaxTurnsThenResume(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		if n := len(outputs(r)); n < 4 {
			return fakeopenai.Calls(fakeopenai.FunctionCall(fmt.Sprintf("c%d", n), "meet", `{}`))
		}
		return fakeopenai.Text("finally")
	}))
	meet := goTool{name: "meet", fn: func(context.Context, string) (string, error) { return "ok", nil }}
	rec := &steps{}
	r := &agentloop.Runner{
		Agents:     map[string]*agentloop.Agent{"a": {Name: "a", Model: newClient(t, srv, "responses"), ModelName: "gpt-test", Instructions: "a", Tools: []tools.Tool{meet}}},
		Checkpoint: rec.add,
		MaxTurns:   2,
	}
	_, err := r.Run(context.Background(), "a", "go", nil)
	if !errors.Is(err, agentloop.ErrMaxTurns) {
		t.Fatalf("err = %v", err)
	}
	before := len(srv.Requests())
	r.MaxTurns = 10
	res, err := r.Run(context.Background(), "a", "go", rec.s)
	if err != nil || finalText(t, res) != "finally" {
		t.Fatalf("resume: %v", err)
	}
	// The resumed run replays the recorded conversation: its first request
	// already carries the two earlier tool outputs.
	if n := len(outputs(srv.Requests()[before])); n != 2 {
		t.Fatalf("first resumed request carries %d outputs, want 2", n)
	}
	assertValid(t, srv)
}

func TestOpenAIFaults(t *testing.T) {
	call := fakeopenai.Calls(fakeopenai.FunctionCall("c1", "meet", `{}`))
	cases := []struct {
		name    string
		replies []fakeopenai.Reply
		wantErr bool
	}{
		{"429 then success", []fakeopenai.Reply{fakeopenai.Status(429, "Retry-After", "0"), call, fakeopenai.Text("done")}, false},
		{"500 twice then success", []fakeopenai.Reply{fakeopenai.Status(500), fakeopenai.Status(500), call, fakeopenai.Text("done")}, false},
		{"truncated stream then success", []fakeopenai.Reply{call, fakeopenai.Truncated(2), fakeopenai.Text("done")}, false},
		{"timeout then success", []fakeopenai.Reply{call, {Fault: fakeopenai.Fault{Kind: fakeopenai.FaultHang, MaxHang: 10 * time.Second}}, fakeopenai.Text("done")}, false},
		{"malformed arguments go back as a tool error", []fakeopenai.Reply{fakeopenai.Calls(fakeopenai.FunctionCall("c1", "strict", `{"n": oops`)), fakeopenai.Text("done")}, false},
		{"persistent 500 fails the run resumably", []fakeopenai.Reply{call, fakeopenai.Status(500), fakeopenai.Status(500), fakeopenai.Status(500), fakeopenai.Status(500)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t)
			srv.Enqueue(tc.replies...)
			meet := goTool{name: "meet", fn: func(context.Context, string) (string, error) { return "ok", nil }}
			strict := goTool{name: "strict", fn: func(_ context.Context, args string) (string, error) {
				var v map[string]any
				if err := json.Unmarshal([]byte(args), &v); err != nil {
					return "", fmt.Errorf("arguments are not valid JSON: %v", err)
				}
				return "ok", nil
			}}
			// Only the hang case needs a short per-request timeout; the
			// others get a generous one, so a loaded machine does not turn
			// a slow answer into an extra retry.
			timeout := 30 * time.Second
			if strings.HasPrefix(tc.name, "timeout") {
				timeout = 2 * time.Second
			}
			c, err := openai.New(openai.Config{APIKey: testKey, BaseURL: srv.URL, MaxRetries: 3, Timeout: timeout, RetryBaseDelay: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			rec := &steps{}
			r := &agentloop.Runner{
				Agents:     map[string]*agentloop.Agent{"a": {Name: "a", Model: c, ModelName: "gpt-test", Instructions: "a", Tools: []tools.Tool{meet, strict}}},
				Checkpoint: rec.add,
			}
			res, err := r.Run(context.Background(), "a", "go", nil)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "model call failed") || strings.Contains(err.Error(), testKey) {
					t.Fatalf("err = %v", err)
				}
				// Resumable: the steps before the failure are kept, and a
				// later attempt continues from them.
				srv.Enqueue(fakeopenai.Text("done"))
				res, err = r.Run(context.Background(), "a", "go", rec.s)
				if err != nil || finalText(t, res) != "done" {
					t.Fatalf("resume after failure: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if finalText(t, res) != "done" {
				t.Fatalf("output %s", res.Output)
			}
			for _, s := range rec.s {
				if s.Kind == agentloop.StepTool && s.Result.CallID == "c1" && strings.Contains(tc.name, "malformed") {
					if !strings.HasPrefix(s.Result.Output, "error:") {
						t.Fatalf("malformed arguments output %q", s.Result.Output)
					}
				}
			}
			assertValid(t, srv)
		})
	}
}
