package daytona

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/sandbox"
)

// FindManaged lists the sandboxes labelled as agentctl's, of every
// lineage, except those being destroyed (sandbox.Lister).
func (p *Provider) FindManaged(ctx context.Context, _ string) ([]sandbox.Found, error) {
	all, err := p.client.List(ctx, map[string]string{sandbox.LabelManaged: "true"})
	if err != nil {
		return nil, fmt.Errorf("listing agentctl's sandboxes: %w", err)
	}
	out := make([]sandbox.Found, 0, len(all))
	for _, s := range all {
		if s.State == StateDestroyed || s.State == StateDestroying {
			continue
		}
		out = append(out, sandbox.Found{ID: s.ID, Name: s.Name, Lineage: s.Labels[sandbox.LabelLineage], Address: s.Labels[sandbox.LabelAddress], State: s.State})
	}
	return out, nil
}

// DeleteFound deletes a sandbox FindManaged listed, after checking it
// still carries agentctl's label.
func (p *Provider) DeleteFound(ctx context.Context, _ string, f sandbox.Found) error {
	s, err := p.client.Get(ctx, f.ID, f.ID)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Labels[sandbox.LabelManaged] != "true" {
		return fmt.Errorf("refusing to delete sandbox %s: it does not carry the %s label", f.ID, sandbox.LabelManaged)
	}
	if err := s.Delete(ctx); err != nil {
		return fmt.Errorf("deleting sandbox %s: %w", f.ID, err)
	}
	return nil
}

// ListsCheaply is false: the listing is a call to Daytona's API.
func (p *Provider) ListsCheaply() bool { return false }
