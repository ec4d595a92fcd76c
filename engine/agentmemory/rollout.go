package agentmemory

import (
	"encoding/json"
	"time"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/state"
)

// A Rollout is a completed run, as the memories of its agents learn from
// it.
type Rollout struct {
	Run addrs.Instance
	// Agent is the name of the agent the run starts with.
	Agent string
	// Digest is the run's digest: a changed run writes a new rollout, a
	// resumed one the same.
	Digest string
	// Steps are the run's checkpointed steps, Output its final output.
	Steps  []agentloop.Step
	Output json.RawMessage
}

// id names the rollout: the run and its digest.
func (r Rollout) id() string {
	return state.SafeName(r.Run.String()) + "-" + r.Digest[:min(12, len(r.Digest))]
}

// jsonl renders the run's conversation as a rollout: a first line
// describing the run, then one line per item (the input, messages, tool
// calls and their outputs, the final answer); no instructions, reasoning
// or compaction items.
func (r Rollout) jsonl(at time.Time) ([]byte, error) {
	items, err := agentloop.Transcript(r.Steps)
	if err != nil {
		return nil, err
	}
	var b []byte
	line := func(v any) {
		j, _ := json.Marshal(v)
		b = append(b, j...)
		b = append(b, '\n')
	}
	line(map[string]any{"rollout_id": r.id(), "run": r.Run.String(), "agent": r.Agent, "updated_at": at.Format(time.RFC3339), "terminal_state": "completed", "final_output": r.Output})
	for _, it := range items {
		switch it.Type {
		case model.ItemMessage:
			if it.Role == "system" || it.Role == "developer" {
				continue
			}
			line(map[string]any{"type": "message", "role": it.Role, "content": it.Text})
		case model.ItemFunctionCall:
			line(map[string]any{"type": "function_call", "call_id": it.CallID, "name": it.Name, "arguments": it.Arguments})
		case model.ItemFunctionCallOutput:
			line(map[string]any{"type": "function_call_output", "call_id": it.CallID, "output": it.Output})
		}
	}
	return b, nil
}

// turns counts agent's model turns (and compactions) among the steps: the
// turn number its memory calls continue from.
func (r Rollout) turns(agent string) int {
	n := 0
	for _, s := range r.Steps {
		if (s.Kind == agentloop.StepModel || s.Kind == agentloop.StepCompaction) && s.Agent == agent {
			n++
		}
	}
	return n
}
