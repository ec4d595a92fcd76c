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

// liveSandbox is what a refresh learned about one sandbox: its status
// at its provider and, for a sandbox another working directory or
// machine owns (sandbox.ElsewhereError), where it lives; its status is
// then sandbox.StatusMissing, since it is not here.
type liveSandbox struct {
	status    sandbox.Status
	elsewhere string
}

// missing reports whether the sandbox is gone, not merely elsewhere.
func (l liveSandbox) missing() bool { return l.status == sandbox.StatusMissing && l.elsewhere == "" }

// refresh asks each provider about the sandboxes in st and returns what
// it learned by address. A sandbox its provider no longer knows is
// sandbox.StatusMissing.
func (e *Engine) refresh(ctx context.Context, st *state.State) (map[string]liveSandbox, error) {
	out := map[string]liveSandbox{}
	for _, addr := range slices.Sorted(maps.Keys(st.Sandboxes)) {
		ss := st.Sandboxes[addr]
		if ss.Status == statusDeleted {
			continue
		}
		sb, err := e.openSandbox(ctx, st, addr)
		if errors.Is(err, sandbox.ErrNotFound) {
			l := liveSandbox{status: sandbox.StatusMissing}
			if ee, ok := errors.AsType[*sandbox.ElsewhereError](err); ok {
				l.elsewhere = ee.Where
			}
			out[addr] = l
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("refreshing %s: %w", addr, err)
		}
		status, err := sb.Refresh(ctx)
		if err != nil {
			return nil, fmt.Errorf("refreshing %s: %w", addr, err)
		}
		out[addr] = liveSandbox{status: status}
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
		if ss.Status != statusDeleted {
			spec.Mounts = e.openMounts(ctx, st.Lineage, addr)
		}
	}
	sb, err := prov.Open(ctx, spec, ss.Session)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ss.Provider, err)
	}
	return sb, nil
}
