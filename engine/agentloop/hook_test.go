package agentloop

import (
	"context"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/providers/scripted"
)

// TestToolStartHookBlocksAndIsNotRepeatedOnResume: a blocking tool_start
// hook keeps the tool from running and the model sees its message; a run
// resumed right after a hook ran does not run it again and blocks the
// call again with the recorded message.
func TestToolStartHookBlocksAndIsNotRepeatedOnResume(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{
		"a": {{Calls: []scripted.Call{call("count", `{"n":1}`)}}, {Text: "done"}},
	})
	var mu sync.Mutex
	ran, hooks := 0, map[string]int{}
	count := funcTool{name: "count", fn: func(context.Context, string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		ran++
		return "counted", nil
	}}
	newRunner := func(rec *recorder) *Runner {
		return &Runner{Agents: map[string]*Agent{"a": agentWith("a", m, count)}, Checkpoint: rec.checkpoint,
			Hook: func(_ context.Context, ev HookEvent) (HookResult, error) {
				mu.Lock()
				defer mu.Unlock()
				hooks[ev.Event]++
				if ev.Event == "tool_start" {
					return HookResult{Ran: true, Block: true, Message: "policy says no"}, nil
				}
				return HookResult{Ran: true}, nil
			}}
	}
	full := &recorder{}
	if _, err := newRunner(full).Run(context.Background(), "a", "go", nil); err != nil {
		t.Fatal(err)
	}
	if ran != 0 || hooks["agent_start"] != 1 || hooks["tool_start"] != 1 || hooks["tool_end"] != 1 || hooks["agent_end"] != 1 {
		t.Fatalf("tool ran %d times, hooks %v", ran, hooks)
	}
	cut := -1
	for i, s := range full.steps {
		if s.Kind == StepTool && s.Result.Output != "policy says no" {
			t.Fatalf("the model saw %q", s.Result.Output)
		}
		if s.Kind == StepHook && s.Hook.Event == "tool_start" {
			cut = i + 1
		}
	}
	if cut < 0 {
		t.Fatalf("no hook step in %+v", full.steps)
	}
	// Killed after the hook was journaled, before the call's result was.
	clear(hooks)
	rec := &recorder{steps: append([]Step(nil), full.steps[:cut]...)}
	if _, err := newRunner(rec).Run(context.Background(), "a", "go", rec.steps); err != nil {
		t.Fatal(err)
	}
	if ran != 0 || hooks["tool_start"] != 0 || hooks["agent_start"] != 0 || hooks["tool_end"] != 1 {
		t.Fatalf("on resume: tool ran %d times, hooks %v", ran, hooks)
	}
	for _, s := range rec.steps {
		if s.Kind == StepTool && s.Result.Output != "policy says no" {
			t.Fatalf("on resume the model saw %q", s.Result.Output)
		}
	}
}
