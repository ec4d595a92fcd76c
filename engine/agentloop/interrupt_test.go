package agentloop_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/providers/openai"
)

// TestInterruptAbandonsModelCallInRetries: a model call that keeps
// failing (the server asks to retry in a minute, 20 times) or that stalls
// ends as soon as Interrupt is closed, with the run interrupted and its
// checkpointed steps intact; resuming from them re-issues the abandoned
// call and does not run the checkpointed tool call again.
func TestInterruptAbandonsModelCallInRetries(t *testing.T) {
	faults := map[string]fakeopenai.Reply{
		"retrying": fakeopenai.Status(503, "Retry-After", "60"),
		"stalled":  {Fault: fakeopenai.Fault{Kind: fakeopenai.FaultHang, MaxHang: 10 * time.Minute}},
	}
	for _, api := range []string{"responses", "chat_completions"} {
		for name, fault := range faults {
			t.Run(api+"/"+name, func(t *testing.T) {
				var failing atomic.Bool
				failing.Store(true)
				var failed atomic.Int32
				srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
					switch {
					case len(outputs(r)) == 0:
						return fakeopenai.Calls(fakeopenai.FunctionCall("c1", "work", `{"n":1}`))
					case failing.Load():
						failed.Add(1)
						return fault
					}
					return fakeopenai.Text("done")
				}))
				// With these settings the failing turn would take 20 minutes
				// of Retry-After waits, or 21 requests of 10 minutes each.
				m, err := openai.New(openai.Config{APIKey: testKey, BaseURL: srv.URL, API: api, MaxRetries: 20, Timeout: 10 * time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				var toolRuns atomic.Int32
				work := goTool{name: "work", fn: func(context.Context, string) (string, error) {
					toolRuns.Add(1)
					return "worked", nil
				}}
				agents := map[string]*agentloop.Agent{"a": {Name: "a", Model: m, ModelName: "gpt-test", Instructions: "work", Tools: []tools.Tool{work}}}
				rec := &steps{}
				interrupt := make(chan struct{})
				r := &agentloop.Runner{Agents: agents, Checkpoint: rec.add, Interrupt: interrupt}

				type result struct {
					res *agentloop.Result
					err error
				}
				done := make(chan result, 1)
				go func() {
					res, err := r.Run(context.Background(), "a", "do the work", nil)
					done <- result{res, err}
				}()
				// Wait until the second turn is failing, then interrupt.
				deadline := time.Now().Add(time.Minute)
				for failed.Load() < 1 {
					if time.Now().After(deadline) {
						t.Fatal("the second model call never reached the server")
					}
					time.Sleep(5 * time.Millisecond)
				}
				close(interrupt)
				var got result
				select {
				case got = <-done:
				case <-time.After(30 * time.Second):
					t.Fatal("the run did not stop after the interrupt: the model call's retries were not abandoned")
				}
				if !errors.Is(got.err, agentloop.ErrInterrupted) {
					t.Fatalf("Run after the interrupt: %v, want ErrInterrupted", got.err)
				}
				if got.res == nil || got.res.Turns != 1 {
					t.Fatalf("result after the interrupt: %+v, want 1 turn", got.res)
				}
				kinds := []agentloop.StepKind{}
				for _, s := range rec.s {
					kinds = append(kinds, s.Kind)
				}
				if want := []agentloop.StepKind{agentloop.StepInput, agentloop.StepModel, agentloop.StepTool}; len(kinds) != 3 || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
					t.Fatalf("checkpointed steps %v, want %v (the abandoned call is not checkpointed)", kinds, want)
				}

				// Resume: the abandoned call is made again, the tool is not.
				failing.Store(false)
				history := append([]agentloop.Step(nil), rec.s...)
				r2 := &agentloop.Runner{Agents: agents, Checkpoint: rec.add}
				res, err := r2.Run(context.Background(), "a", "do the work", history)
				if err != nil {
					t.Fatal(err)
				}
				if finalText(t, res) != "done" || res.Turns != 2 {
					t.Fatalf("resumed run: %s after %d turns", res.Output, res.Turns)
				}
				if n := toolRuns.Load(); n != 1 {
					t.Fatalf("the checkpointed tool call ran %d times, want 1", n)
				}
				assertValid(t, srv)
			})
		}
	}
}
