package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// Refresh asks each provider about the sandboxes in st and returns their
// live status by address. A sandbox its provider no longer knows is
// sandbox.StatusMissing.
func (e *Engine) Refresh(ctx context.Context, st *state.State) (map[string]sandbox.Status, error) {
	out := map[string]sandbox.Status{}
	for _, addr := range slices.Sorted(maps.Keys(st.Sandboxes)) {
		ss := st.Sandboxes[addr]
		if ss.Status == statusDeleted {
			continue
		}
		sb, err := e.openSandbox(ctx, st, addr)
		if errors.Is(err, sandbox.ErrNotFound) {
			out[addr] = sandbox.StatusMissing
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("refreshing %s: %w", addr, err)
		}
		status, err := sb.Refresh(ctx)
		if err != nil {
			return nil, fmt.Errorf("refreshing %s: %w", addr, err)
		}
		out[addr] = status
		e.emit(Event{Type: EventRefresh, Address: addr, Message: string(status)})
	}
	return out, nil
}

// openSandbox reconnects to a sandbox recorded in state.
func (e *Engine) openSandbox(ctx context.Context, st *state.State, addr string) (sandbox.Sandbox, error) {
	ss := st.Sandboxes[addr]
	if ss == nil {
		return nil, fmt.Errorf("%s is not in the state: run agentctl apply first", addr)
	}
	prov, err := e.provs().sandboxProvider(ctx, e, ss.Provider)
	if err != nil {
		return nil, err
	}
	spec := sandbox.Spec{Address: addr, Lineage: st.Lineage, StateDir: e.State.Abs("sandboxes")}
	if sb := e.Config.SandboxInstances[addr]; sb != nil {
		spec = e.sandboxSpec(sb, st.Lineage)
	}
	sb, err := prov.Open(ctx, spec, ss.Session)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ss.Provider, err)
	}
	return sb, nil
}
