package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/scripted"
	"github.com/agentctl/agentctl/sandbox"
)

// funcTool is a function tool backed by a Go func, for exercising the loop.
type funcTool struct {
	name string
	fn   func(ctx context.Context, args string) (string, error)
}

func (t funcTool) Definition() model.Tool {
	return model.Tool{Name: t.name, Description: t.name, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (t funcTool) Call(ctx context.Context, args string) (tools.Output, error) {
	s, err := t.fn(ctx, args)
	return tools.Output{Text: s}, err
}

func call(name, args string) scripted.Call {
	return scripted.Call{Name: name, Arguments: json.RawMessage(args)}
}

type recorder struct {
	mu    sync.Mutex
	steps []Step
}

func (r *recorder) checkpoint(_ context.Context, s Step) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Round-trip through JSON as the journal does.
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	var back Step
	if err := json.Unmarshal(b, &back); err != nil {
		return err
	}
	r.steps = append(r.steps, back)
	return nil
}

func agentWith(name string, m model.Model, ts ...tools.Tool) *Agent {
	return &Agent{Name: name, Model: m, ModelName: "scripted", Instructions: "You are " + name, Tools: ts}
}

func outputString(t *testing.T, res *Result) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(res.Output, &s); err != nil {
		t.Fatalf("output %s is not a string: %v", res.Output, err)
	}
	return s
}

func TestToolLoopAndResumeFromEveryStep(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{
		"analyst": {
			{Calls: []scripted.Call{call("count", `{"n":1}`)}},
			{Text: "thinking", Calls: []scripted.Call{call("count", `{"n":2}`), call("count", `{"n":3}`)}},
			{Text: "The answer is 42."},
		},
	})
	var mu sync.Mutex
	calls := map[string]int{}
	count := funcTool{name: "count", fn: func(_ context.Context, args string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[args]++
		return "counted " + args, nil
	}}
	newRunner := func(rec *recorder) *Runner {
		return &Runner{Agents: map[string]*Agent{"analyst": agentWith("analyst", m, count)}, Checkpoint: rec.checkpoint}
	}
	full := &recorder{}
	res, err := newRunner(full).Run(context.Background(), "analyst", "What is the answer?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := outputString(t, res); got != "The answer is 42." {
		t.Fatalf("output = %q", got)
	}
	if res.Turns != 3 {
		t.Fatalf("turns = %d, want 3", res.Turns)
	}
	// input, model, tool, model, tool, tool, model
	if len(full.steps) != 7 {
		t.Fatalf("steps = %d, want 7", len(full.steps))
	}
	for k, n := range calls {
		if n != 1 {
			t.Fatalf("tool call %s ran %d times", k, n)
		}
	}
	// Resuming from any prefix finishes with the same output and runs
	// only the tool calls that had no recorded output.
	for cut := 0; cut <= len(full.steps); cut++ {
		mu.Lock()
		clear(calls)
		mu.Unlock()
		rec := &recorder{steps: append([]Step(nil), full.steps[:cut]...)}
		res, err := newRunner(rec).Run(context.Background(), "analyst", "What is the answer?", rec.steps)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if got := outputString(t, res); got != "The answer is 42." {
			t.Fatalf("cut %d: output = %q", cut, got)
		}
		if len(rec.steps) != len(full.steps) {
			t.Fatalf("cut %d: %d steps after resume, want %d", cut, len(rec.steps), len(full.steps))
		}
		want := 0
		for _, s := range full.steps[cut:] {
			if s.Kind == StepTool {
				want++
			}
		}
		got := 0
		for _, n := range calls {
			got += n
		}
		if got != want {
			t.Fatalf("cut %d: %d tool executions on resume, want %d", cut, got, want)
		}
	}
}

func TestParallelToolCallsRunConcurrently(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{
		"a": {
			{Calls: []scripted.Call{call("meet", `{}`), call("meet", `{}`), call("meet", `{}`)}},
			{Text: "done"},
		},
	})
	// Each call waits until all three are running: sequential execution
	// would never get past the barrier.
	var wg sync.WaitGroup
	wg.Add(3)
	meet := funcTool{name: "meet", fn: func(ctx context.Context, _ string) (string, error) {
		wg.Done()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return "met", nil
		case <-time.After(10 * time.Second):
			return "", errors.New("calls did not run concurrently")
		}
	}}
	rec := &recorder{}
	res, err := (&Runner{Agents: map[string]*Agent{"a": agentWith("a", m, meet)}, Checkpoint: rec.checkpoint}).Run(context.Background(), "a", "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rec.steps {
		if s.Kind == StepTool && s.Result.Output != "met" {
			t.Fatalf("tool output %q", s.Result.Output)
		}
	}
	if outputString(t, res) != "done" {
		t.Fatal("bad output")
	}
}

func TestCircularHandoffEnds(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{
		"analyst":    {{Calls: []scripted.Call{call("transfer_to_copywriter", `{}`)}}, {Text: "final from analyst"}},
		"copywriter": {{Calls: []scripted.Call{call("transfer_to_analyst", `{}`)}}},
	})
	an := agentWith("analyst", m)
	an.Handoffs = []Handoff{{Agent: "copywriter"}}
	cw := agentWith("copywriter", m)
	cw.Handoffs = []Handoff{{Agent: "analyst"}}
	var events []Event
	rec := &recorder{}
	r := &Runner{Agents: map[string]*Agent{"analyst": an, "copywriter": cw}, Checkpoint: rec.checkpoint, Events: func(e Event) { events = append(events, e) }}
	res, err := r.Run(context.Background(), "analyst", "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	if outputString(t, res) != "final from analyst" || res.Agent != "analyst" {
		t.Fatalf("output %s from %s", res.Output, res.Agent)
	}
	var handoffs []string
	for _, e := range events {
		if e.Type == EventHandoff {
			handoffs = append(handoffs, e.Agent+"->"+e.Text)
		}
	}
	if strings.Join(handoffs, ",") != "analyst->copywriter,copywriter->analyst" {
		t.Fatalf("handoffs %v", handoffs)
	}
	// The handoff output follows the SDK's shape.
	if rec.steps[2].Result.Output != `{"assistant":"copywriter"}` {
		t.Fatalf("handoff output %q", rec.steps[2].Result.Output)
	}
	// Resume after the first handoff continues with the copywriter.
	rec2 := &recorder{steps: append([]Step(nil), rec.steps[:3]...)}
	r.Checkpoint = rec2.checkpoint
	res, err = r.Run(context.Background(), "analyst", "hi", rec2.steps)
	if err != nil || outputString(t, res) != "final from analyst" {
		t.Fatalf("resume: %v %s", err, res.Output)
	}
}

func TestAgentToolsRunConcurrentlyWithStructuredOutput(t *testing.T) {
	replies := map[string][]scripted.Reply{
		"lead": {
			{Calls: []scripted.Call{
				call("review", `{"input":"pricing"}`), call("review", `{"input":"rollout"}`),
				call("review", `{"input":"legal"}`), call("review", `{"input":"support"}`),
			}},
			{Text: "all reviewed"},
		},
	}
	for i := 0; i < 4; i++ {
		replies["reviewer"] = append(replies["reviewer"],
			scripted.Reply{Calls: []scripted.Call{call("meet", `{}`)}})
	}
	for i := 0; i < 4; i++ {
		replies["reviewer"] = append(replies["reviewer"], scripted.Reply{Text: `{"verdict":"ok"}`})
	}
	m := scripted.New(replies)
	var wg sync.WaitGroup
	wg.Add(4)
	meet := funcTool{name: "meet", fn: func(context.Context, string) (string, error) {
		wg.Done()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return "met", nil
		case <-time.After(10 * time.Second):
			return "", errors.New("agent tools did not run concurrently")
		}
	}}
	lead := agentWith("lead", m)
	lead.AgentTools = []AgentTool{{Name: "review", Agent: "reviewer", Description: "Review a plan."}}
	rev := agentWith("reviewer", m, meet)
	rev.OutputSchema = json.RawMessage(`{"type":"object","properties":{"verdict":{"type":"string"}},"required":["verdict"],"additionalProperties":false}`)
	rec := &recorder{}
	res, err := (&Runner{Agents: map[string]*Agent{"lead": lead, "reviewer": rev}, Checkpoint: rec.checkpoint}).Run(context.Background(), "lead", "review all", nil)
	if err != nil {
		t.Fatal(err)
	}
	if outputString(t, res) != "all reviewed" {
		t.Fatalf("output %s", res.Output)
	}
	n := 0
	for _, s := range rec.steps {
		if s.Kind == StepTool && s.Path == "" {
			n++
			if s.Result.Output != `{"verdict":"ok"}` {
				t.Fatalf("agent tool output %q", s.Result.Output)
			}
		}
		if s.Kind == StepTool && s.Path != "" && s.Result.Output != "met" {
			t.Fatalf("nested tool output %q", s.Result.Output)
		}
	}
	if n != 4 {
		t.Fatalf("%d agent tool results, want 4", n)
	}
}

func TestStructuredOutputMismatchFails(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{"a": {{Text: `{"summary": 3}`}}})
	a := agentWith("a", m)
	a.OutputSchema = json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`)
	_, err := (&Runner{Agents: map[string]*Agent{"a": a}}).Run(context.Background(), "a", "x", nil)
	if err == nil || !strings.Contains(err.Error(), "output_schema") {
		t.Fatalf("err = %v", err)
	}
}

func TestMaxTurnsIsResumable(t *testing.T) {
	var replies []scripted.Reply
	for i := 0; i < 5; i++ {
		replies = append(replies, scripted.Reply{Calls: []scripted.Call{call("noop", `{}`)}})
	}
	replies = append(replies, scripted.Reply{Text: "finally"})
	m := scripted.New(map[string][]scripted.Reply{"a": replies})
	noop := funcTool{name: "noop", fn: func(context.Context, string) (string, error) { return "ok", nil }}
	rec := &recorder{}
	r := &Runner{Agents: map[string]*Agent{"a": agentWith("a", m, noop)}, Checkpoint: rec.checkpoint, MaxTurns: 3}
	_, err := r.Run(context.Background(), "a", "x", nil)
	if !errors.Is(err, ErrMaxTurns) || !strings.Contains(err.Error(), "max_turns") {
		t.Fatalf("err = %v", err)
	}
	r.MaxTurns = 10
	res, err := r.Run(context.Background(), "a", "x", rec.steps)
	if err != nil || outputString(t, res) != "finally" || res.Turns != 6 {
		t.Fatalf("resume: %v %v", err, res)
	}
}

func TestToolFailuresGoBackToTheModel(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{"a": {
		{Calls: []scripted.Call{call("fails", `{}`), call("nosuchtool", `{}`)}},
		{Text: "recovered"},
	}})
	fails := funcTool{name: "fails", fn: func(context.Context, string) (string, error) { return "", fmt.Errorf("boom") }}
	rec := &recorder{}
	res, err := (&Runner{Agents: map[string]*Agent{"a": agentWith("a", m, fails)}, Checkpoint: rec.checkpoint}).Run(context.Background(), "a", "x", nil)
	if err != nil || outputString(t, res) != "recovered" {
		t.Fatalf("%v %v", err, res)
	}
	var outs []string
	for _, s := range rec.steps {
		if s.Kind == StepTool {
			outs = append(outs, s.Result.Output)
		}
	}
	joined := strings.Join(outs, "|")
	if !strings.Contains(joined, "error: boom") || !strings.Contains(joined, `unknown tool "nosuchtool"`) {
		t.Fatalf("outputs %q", joined)
	}
}

// TestSandboxFailureEndsTheRun: a tool whose sandbox stopped under it
// ends the run with an error naming the sandbox, in the top-level
// conversation and in an agent-tool run; the call is not recorded (its
// sibling that succeeded is), so the resumed run executes it again and
// finishes.
func TestSandboxFailureEndsTheRun(t *testing.T) {
	for _, nested := range []bool{false, true} {
		t.Run(fmt.Sprintf("nested=%v", nested), func(t *testing.T) {
			replies := map[string][]scripted.Reply{"worker": {
				{Calls: []scripted.Call{call("step", `{"n":1}`), call("ok", `{}`)}},
				{Text: "done"},
			}}
			if nested {
				replies["boss"] = []scripted.Reply{
					{Calls: []scripted.Call{call("worker", `{"input":"go"}`)}},
					{Text: "boss done"},
				}
			}
			m := scripted.New(replies)
			down := true
			runs := 0
			step := funcTool{name: "step", fn: func(context.Context, string) (string, error) {
				runs++
				if down {
					return "", fmt.Errorf("step: running it: %w", &sandbox.UnavailableError{Address: "sandbox.box", Status: sandbox.StatusStopped, Err: errors.New("container is not running")})
				}
				return "stepped", nil
			}}
			ok := funcTool{name: "ok", fn: func(context.Context, string) (string, error) { return "fine", nil }}
			agents := map[string]*Agent{"worker": agentWith("worker", m, step, ok)}
			start := "worker"
			if nested {
				boss := agentWith("boss", m)
				boss.AgentTools = []AgentTool{{Name: "worker", Agent: "worker", Description: "works"}}
				agents["boss"] = boss
				start = "boss"
			}
			rec := &recorder{}
			r := &Runner{Agents: agents, Checkpoint: rec.checkpoint}
			_, err := r.Run(context.Background(), start, "x", nil)
			if err == nil || !strings.HasPrefix(err.Error(), "sandbox.box stopped during the run: step: running it: container is not running") {
				t.Fatalf("err = %v", err)
			}
			var outs []string
			for _, s := range rec.steps {
				if s.Kind == StepTool {
					outs = append(outs, s.Result.Output)
				}
			}
			if len(outs) != 1 || outs[0] != "fine" {
				t.Fatalf("recorded tool outputs %q, want only the call that succeeded", outs)
			}
			down = false
			res, err := r.Run(context.Background(), start, "x", rec.steps)
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			want := "done"
			if nested {
				want = "boss done"
			}
			if got := outputString(t, res); got != want || runs != 2 {
				t.Fatalf("resumed output %q, step ran %d times; want %q and 2", got, runs, want)
			}
		})
	}
}

func TestInterruptStopsBetweenSteps(t *testing.T) {
	stop := make(chan struct{})
	m := scripted.New(map[string][]scripted.Reply{"a": {
		{Calls: []scripted.Call{call("stopper", `{}`)}},
		{Text: "done"},
	}})
	stopper := funcTool{name: "stopper", fn: func(context.Context, string) (string, error) { close(stop); return "stopping", nil }}
	rec := &recorder{}
	r := &Runner{Agents: map[string]*Agent{"a": agentWith("a", m, stopper)}, Checkpoint: rec.checkpoint, Interrupt: stop}
	_, err := r.Run(context.Background(), "a", "x", nil)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
	// The tool result in flight was checkpointed.
	if last := rec.steps[len(rec.steps)-1]; last.Kind != StepTool || last.Result.Output != "stopping" {
		t.Fatalf("last step %+v", last)
	}
	r.Interrupt = nil
	res, err := r.Run(context.Background(), "a", "x", rec.steps)
	if err != nil || outputString(t, res) != "done" {
		t.Fatalf("resume: %v", err)
	}
}

func TestScriptRunsOut(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{"a": {{Calls: []scripted.Call{call("noop", `{}`)}}}})
	noop := funcTool{name: "noop", fn: func(context.Context, string) (string, error) { return "ok", nil }}
	_, err := (&Runner{Agents: map[string]*Agent{"a": agentWith("a", m, noop)}}).Run(context.Background(), "a", "x", nil)
	if err == nil || !strings.Contains(err.Error(), "ran out of replies") {
		t.Fatalf("err = %v", err)
	}
}
