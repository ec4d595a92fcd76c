package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// sandboxDrift asks a refreshed sandbox whose provider implements
// sandbox.Drifter whether it still matches its configuration (a docker
// image tag rebuilt since the container was created, for example). It
// returns the replace reason, or "" when there is none.
func (e *Engine) sandboxDrift(ctx context.Context, st *state.State, addr string) (string, error) {
	sb, err := e.openSandbox(ctx, st, addr)
	if errors.Is(err, sandbox.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("refreshing %s: %w", addr, err)
	}
	d, ok := sb.(sandbox.Drifter)
	if !ok {
		return "", nil
	}
	sbc := e.Config.SandboxInstances[addr]
	if sbc == nil {
		return "", nil
	}
	reason, err := d.Drift(ctx, e.sandboxSpec(sbc, st.Lineage))
	if err != nil {
		return "", fmt.Errorf("refreshing %s: %w", addr, err)
	}
	return reason, nil
}
