package e2b

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/sandbox"
)

// FindManaged lists the running and paused sandboxes whose metadata
// marks them as agentctl's, of every lineage (sandbox.Lister).
func (p *Provider) FindManaged(ctx context.Context, _ string) ([]sandbox.Found, error) {
	all, err := p.client.List(ctx, map[string]string{sandbox.LabelManaged: "true"})
	if err != nil {
		return nil, fmt.Errorf("listing agentctl's sandboxes: %w", err)
	}
	out := make([]sandbox.Found, 0, len(all))
	for _, s := range all {
		out = append(out, sandbox.Found{ID: s.ID, Lineage: s.Metadata[sandbox.LabelLineage], Address: s.Metadata[sandbox.LabelAddress], State: s.State})
	}
	return out, nil
}

// DeleteFound kills a sandbox FindManaged listed, after checking its
// metadata still marks it as agentctl's.
func (p *Provider) DeleteFound(ctx context.Context, _ string, f sandbox.Found) error {
	s, err := p.client.Get(ctx, f.ID, f.ID)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Metadata[sandbox.LabelManaged] != "true" {
		return fmt.Errorf("refusing to kill sandbox %s: its metadata does not carry %s", f.ID, sandbox.LabelManaged)
	}
	if err := s.Kill(ctx); err != nil {
		return fmt.Errorf("killing sandbox %s: %w", f.ID, err)
	}
	return nil
}

// ListsCheaply is false: the listing is a call to E2B's API.
func (p *Provider) ListsCheaply() bool { return false }
