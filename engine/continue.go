package engine

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/state"
)

// A run with continue = run.X starts from run.X's transcript
// (agentloop.Transcript of its journal: every item of its top-level
// conversation, in order) followed by its own input. run.X is one of its
// upstream runs, so it executes first and must have completed; the
// transcript's digest is one of the run's digest inputs
// (run.X.transcript), so a change of run.X's conversation re-runs it.

// continuedTranscript returns the transcript of the run ri continues, as
// recorded in st, and adds its digest to inputs; nil when ri continues
// no run.
func (e *Engine) continuedTranscript(ctx context.Context, st *state.State, ri *config.RunInstance, inputs map[string]string) ([]model.Item, error) {
	if ri.Continue == "" {
		return nil, nil
	}
	up := st.Runs[ri.Continue]
	if up == nil || up.Status != RunCompleted {
		return nil, fmt.Errorf("%s: %s, whose conversation it continues, has not completed", ri.Addr, ri.Continue)
	}
	steps, err := e.readJournal(ctx, up)
	if err != nil {
		return nil, fmt.Errorf("%s continues %s: %w", ri.Addr, ri.Continue, err)
	}
	items, err := agentloop.Transcript(steps)
	if err != nil {
		return nil, fmt.Errorf("%s continues %s: its journal: %w", ri.Addr, ri.Continue, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s continues %s, whose journal holds no transcript: run it again with agentctl apply -replace=%s", ri.Addr, ri.Continue, ri.Continue)
	}
	inputs[ri.Continue+".transcript"] = digestJSON(items)
	return items, nil
}
