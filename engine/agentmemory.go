package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentmemory"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/state"
)

// memory is the memory work of the apply (engine/agentmemory), over its
// state and journals.
func (a *applier) memory() *agentmemory.Writer {
	e := a.e
	sc := e.scrubber()
	return &agentmemory.Writer{
		Config:   e.Config,
		State:    memoryState{a},
		Journals: e.State,
		Model: func(ag *config.Agent, run string) (model.Model, error) {
			m, _, err := e.provs().model(e, ag, run)
			return m, err
		},
		Scrub: func(it model.Item) model.Item { return scrubItem(sc, it) },
		Progress: func(key agentmemory.Key, msg string) {
			e.emit(Event{Type: EventApplyProgress, Address: "memory " + key.String(), Message: msg})
		},
	}
}

// memoryState is the applier's state as the memory work sees it
// (agentmemory.State).
type memoryState struct{ a *applier }

func (s memoryState) Update(ctx context.Context, fn func(st *state.State), refs ...state.Ref) error {
	return s.a.update(ctx, fn, refs...)
}

func (s memoryState) View(fn func(st *state.State)) {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	fn(s.a.st)
}

// memoryFinish does the memory work still waiting at the end of an apply
// (this apply's, or an earlier one's that stopped): phase 1 of any
// rollout left, then a consolidation of everything extracted, and a
// snapshot of each sandbox whose memory changed so the memory survives
// in it. An interrupted apply leaves the work for the next one.
func (a *applier) memoryFinish(ctx context.Context) error {
	if a.e.interrupted() {
		return nil
	}
	a.mu.Lock()
	var keys []string
	for _, key := range slices.Sorted(maps.Keys(a.st.Memories)) {
		if a.st.Memories[key].Pending() {
			keys = append(keys, key)
		}
	}
	a.mu.Unlock()
	w := a.memory()
	var errs []error
	for _, k := range keys {
		key, err := agentmemory.ParseKey(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: not a key agentctl writes, so its waiting work is not done", err))
			continue
		}
		sbAddr := key.Sandbox.String()
		if a.e.Config.SandboxInstances[sbAddr] == nil {
			errs = append(errs, fmt.Errorf("memory %s has work waiting, but %s is no longer in the configuration", key, sbAddr))
			continue
		}
		sb, err := a.ensureRunning(ctx, sbAddr)
		if err != nil {
			errs = append(errs, fmt.Errorf("memory %s: %w", key, err))
			continue
		}
		if err := w.Process(ctx, key, a.e.workspace(sbAddr, sb)); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := a.snapshot(ctx, sbAddr, sb); err != nil {
			errs = append(errs, fmt.Errorf("memory %s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}
