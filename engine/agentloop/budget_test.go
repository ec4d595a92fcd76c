package agentloop

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/scripted"
)

// usageModel answers from a script with fixed usage per response.
type usageModel struct {
	inner *scripted.Model
	usage model.Usage
	calls atomic.Int32
}

func (m *usageModel) Respond(ctx context.Context, req *model.Request, sink func(model.Event)) (*model.Response, error) {
	m.calls.Add(1)
	resp, err := m.inner.Respond(ctx, req, sink)
	if resp != nil {
		resp.Usage = m.usage
	}
	return resp, err
}

func loopReplies(calls int, perTurn int) []scripted.Reply {
	var replies []scripted.Reply
	for i := 0; i < calls; i++ {
		var cs []scripted.Call
		for j := 0; j < perTurn; j++ {
			cs = append(cs, call("noop", `{}`))
		}
		replies = append(replies, scripted.Reply{Calls: cs})
	}
	return append(replies, scripted.Reply{Text: "done"})
}

func TestTokenBudgetStopsAndResumesWhenRaised(t *testing.T) {
	m := &usageModel{inner: scripted.New(map[string][]scripted.Reply{"a": loopReplies(4, 1)}), usage: model.Usage{InputTokens: 4000, OutputTokens: 1000}}
	var ran atomic.Int32
	noop := funcTool{name: "noop", fn: func(context.Context, string) (string, error) { ran.Add(1); return "ok", nil }}
	rec := &recorder{}
	r := &Runner{Agents: map[string]*Agent{"a": agentWith("a", m, noop)}, Checkpoint: rec.checkpoint, Budget: Budget{MaxTokens: 10_000}}
	_, err := r.Run(context.Background(), "a", "x", nil)
	var be *BudgetError
	if !errors.Is(err, ErrBudget) || !errors.As(err, &be) {
		t.Fatalf("err = %v, want a budget error", err)
	}
	// Two turns of 5,000 tokens reach the limit: neither the second
	// response's tool call nor a third model call is made.
	want := "budget exceeded: 10,000 tokens used of max_tokens = 10,000; raise max_tokens in the run's budget block"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to contain %q", err, want)
	}
	if m.calls.Load() != 2 || ran.Load() != 1 {
		t.Fatalf("model calls %d, tool calls %d; want 2 and 1", m.calls.Load(), ran.Load())
	}
	// Resuming under the same budget stops again at once, without a call.
	if _, err := r.Run(context.Background(), "a", "x", rec.steps); !errors.Is(err, ErrBudget) || m.calls.Load() != 2 {
		t.Fatalf("resume under the same budget: err %v, %d model calls", err, m.calls.Load())
	}
	r.Budget.MaxTokens = 100_000
	res, err := r.Run(context.Background(), "a", "x", rec.steps)
	if err != nil || outputString(t, res) != "done" {
		t.Fatalf("resume after raising: %v %+v", err, res)
	}
	if m.calls.Load() != 5 || res.Spending.Tokens() != 25_000 || res.Spending.ToolCalls != 4 {
		t.Fatalf("model calls %d, spending %+v; want 5 calls, 25,000 tokens, 4 tool calls", m.calls.Load(), res.Spending)
	}
}

func TestToolCallBudgetRunsOnlyWhatFits(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{"a": loopReplies(2, 3)})
	var ran atomic.Int32
	noop := funcTool{name: "noop", fn: func(context.Context, string) (string, error) { ran.Add(1); return "ok", nil }}
	rec := &recorder{}
	a := agentWith("a", m, noop)
	a.Budget = Budget{MaxToolCalls: 4}
	r := &Runner{Agents: map[string]*Agent{"a": a}, Checkpoint: rec.checkpoint}
	_, err := r.Run(context.Background(), "a", "x", nil)
	want := `budget exceeded: agent "a" used 4 tool calls of its max_tool_calls = 4, and the model asked for 2 more; raise max_tool_calls in agent "a"'s budget block`
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if ran.Load() != 4 {
		t.Fatalf("%d tool calls ran, want 4", ran.Load())
	}
	a.Budget.MaxToolCalls = 6
	res, err := r.Run(context.Background(), "a", "x", rec.steps)
	if err != nil || outputString(t, res) != "done" || ran.Load() != 6 || res.Spending.Agents["a"].ToolCalls != 6 {
		t.Fatalf("resume: %v, %d calls ran, spending %+v", err, ran.Load(), res.Spending)
	}
}

func TestDurationBudgetCountsAcrossAttempts(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{"a": loopReplies(3, 1)})
	slow := funcTool{name: "noop", fn: func(context.Context, string) (string, error) { time.Sleep(1100 * time.Millisecond); return "ok", nil }}
	rec := &recorder{}
	r := &Runner{Agents: map[string]*Agent{"a": agentWith("a", m, slow)}, Checkpoint: rec.checkpoint, Budget: Budget{MaxDuration: time.Second}}
	_, err := r.Run(context.Background(), "a", "x", nil)
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "of running time used of max_duration = 1s") {
		t.Fatalf("err = %v", err)
	}
	spent := Spend(rec.steps)
	if spent.Duration < time.Second || spent.ToolCalls != 1 {
		t.Fatalf("journal records %+v, want at least 1s and 1 tool call", spent.Spent)
	}
	// The time recorded counts on resume: raised to 2s, one more slow call
	// passes it.
	r.Budget.MaxDuration = 2 * time.Second
	_, err = r.Run(context.Background(), "a", "x", rec.steps)
	if !errors.Is(err, ErrBudget) || Spend(rec.steps).ToolCalls != 2 {
		t.Fatalf("second attempt: err %v, %d tool calls", err, Spend(rec.steps).ToolCalls)
	}
	r.Budget = Budget{}
	if res, err := r.Run(context.Background(), "a", "x", rec.steps); err != nil || outputString(t, res) != "done" {
		t.Fatalf("without a budget: %v", err)
	}
}

func TestNestedAgentBudgetFailsTheRun(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{
		"boss":   {{Calls: []scripted.Call{call("helper", `{"input":"go"}`)}}, {Text: "all done"}},
		"helper": loopReplies(3, 1),
	})
	noop := funcTool{name: "noop", fn: func(context.Context, string) (string, error) { return "ok", nil }}
	boss := agentWith("boss", m)
	boss.AgentTools = []AgentTool{{Name: "helper", Agent: "helper", Description: "helps"}}
	helper := agentWith("helper", m, noop)
	helper.Budget = Budget{MaxToolCalls: 1}
	rec := &recorder{}
	r := &Runner{Agents: map[string]*Agent{"boss": boss, "helper": helper}, Checkpoint: rec.checkpoint}
	_, err := r.Run(context.Background(), "boss", "x", nil)
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), `agent "helper" used 1 tool calls of its max_tool_calls = 1`) {
		t.Fatalf("err = %v: a nested run's budget must fail the run, not become tool output", err)
	}
	helper.Budget = Budget{}
	res, err := r.Run(context.Background(), "boss", "x", rec.steps)
	if err != nil || outputString(t, res) != "all done" {
		t.Fatalf("resume: %v", err)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 12345: "12,345", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
