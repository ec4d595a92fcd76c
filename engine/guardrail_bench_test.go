package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/providers/scripted"
)

// BenchmarkGuardrailTurn measures a scripted turn (one model call, one
// tool call, checkpoints kept in memory) with no guardrail, with one
// expression guardrail on the call's arguments, and with a second on its
// output (each evaluation checkpointed), side by side: the difference is
// a guardrail's cost per turn.
func BenchmarkGuardrailTurn(b *testing.B) {
	e := engineIn(b, b.TempDir(), `
guardrail "args" {
  on        = "tool_input"
  condition = !can(regex("(?i)rm\\s+-rf", guard.arguments.cmd)) && length(guard.text) < 10000
}
guardrail "out" {
  on        = "tool_output"
  condition = !can(regex("(?i)api[_-]?key", guard.text))
}
`)
	guards := loopGuardrails(e.Config, []string{"args", "out"})
	const turns = 200
	for _, tc := range []struct {
		name   string
		guards []agentloop.Guardrail
	}{{"none", nil}, {"one", guards[:1]}, {"two", guards}} {
		b.Run(tc.name, func(b *testing.B) {
			replies := make([]scripted.Reply, 0, turns+1)
			for range turns {
				replies = append(replies, scripted.Reply{Calls: []scripted.Call{{Name: "note", Arguments: json.RawMessage(`{"cmd":"ls -la"}`)}}})
			}
			replies = append(replies, scripted.Reply{Text: "done"})
			for b.Loop() {
				var steps []agentloop.Step
				r := &agentloop.Runner{
					Agents:     map[string]*agentloop.Agent{"a": {Name: "a", Model: scripted.New(map[string][]scripted.Reply{"a": replies}), Guardrails: tc.guards}},
					MaxTurns:   turns + 1,
					Checkpoint: func(_ context.Context, s agentloop.Step) error { steps = append(steps, s); return nil },
				}
				if _, err := r.Run(context.Background(), "a", "go", nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/turns/1000, "µs/turn")
		})
	}
}
