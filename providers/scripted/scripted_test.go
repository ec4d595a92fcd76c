package scripted

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/model"
)

func TestRepliesInOrderPerAgentTurn(t *testing.T) {
	m := New(map[string][]Reply{
		"analyst": {
			{Calls: []Call{{Name: "exec_command", Arguments: json.RawMessage(`{"cmd":"awk 'NR>1' a.csv && echo <done>"}`)}}},
			{Text: "Q3 was best."},
		},
	})
	var deltas []string
	r0, err := m.Respond(context.Background(), &model.Request{Agent: "analyst", AgentTurn: 0}, func(e model.Event) {
		if e.Type == model.EventTextDelta {
			deltas = append(deltas, e.Delta)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := r0.FunctionCalls()
	if len(calls) != 1 || calls[0].Name != "exec_command" || calls[0].CallID == "" {
		t.Fatalf("turn 0 calls = %+v", calls)
	}
	// Arguments reach the tool as written: no HTML escaping of < > &.
	if calls[0].Arguments != `{"cmd":"awk 'NR>1' a.csv && echo <done>"}` {
		t.Fatalf("arguments = %s", calls[0].Arguments)
	}
	r1, err := m.Respond(context.Background(), &model.Request{Agent: "analyst", AgentTurn: 1}, func(e model.Event) {
		if e.Type == model.EventTextDelta {
			deltas = append(deltas, e.Delta)
		}
	})
	if err != nil || r1.Text() != "Q3 was best." || len(r1.FunctionCalls()) != 0 {
		t.Fatalf("turn 1 = %+v, %v", r1, err)
	}
	if strings.Join(deltas, "") != "Q3 was best." {
		t.Fatalf("streamed %q", deltas)
	}
	// The same turn gives the same reply again (a resumed run).
	again, _ := m.Respond(context.Background(), &model.Request{Agent: "analyst", AgentTurn: 0}, nil)
	if again.FunctionCalls()[0].CallID != calls[0].CallID {
		t.Fatal("call IDs are not deterministic")
	}
}

func TestRunningOutAndMissingScriptsAreClearErrors(t *testing.T) {
	m := New(map[string][]Reply{"analyst": {{Text: "only one"}}})
	_, err := m.Respond(context.Background(), &model.Request{Agent: "analyst", AgentTurn: 1}, nil)
	if err == nil || !strings.Contains(err.Error(), `ran out of replies for agent "analyst"`) || !strings.Contains(err.Error(), "add reply blocks") {
		t.Fatalf("err = %v", err)
	}
	_, err = m.Respond(context.Background(), &model.Request{Agent: "writer"}, nil)
	if err == nil || !strings.Contains(err.Error(), `no script for agent "writer"`) {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Respond(ctx, &model.Request{Agent: "analyst"}, nil); err == nil {
		t.Fatal("a cancelled context was ignored")
	}
}
