package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
)

// FindManaged lists every container labelled as agentctl's, of every
// lineage, running or not (sandbox.Lister).
func (p *Provider) FindManaged(ctx context.Context, _ string) ([]sandbox.Found, error) {
	ms, err := p.ListManaged(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Found, 0, len(ms))
	for _, m := range ms {
		out = append(out, sandbox.Found{ID: m.ID, Name: m.Name, Lineage: m.Lineage, Address: m.Address, State: m.State})
	}
	return out, nil
}

// DeleteFound removes a container FindManaged listed, with its anonymous
// volumes, after checking it still carries agentctl's label.
func (p *Provider) DeleteFound(ctx context.Context, _ string, f sandbox.Found) error {
	res, err := p.cli.ContainerInspect(ctx, f.ID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspecting container %s: %w", short(f.ID), err)
	}
	if c := res.Container; c.Config == nil || c.Config.Labels[sandbox.LabelManaged] != "true" {
		return fmt.Errorf("refusing to remove container %s: it does not carry the %s label", short(f.ID), sandbox.LabelManaged)
	}
	if _, err := p.cli.ContainerRemove(ctx, f.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("removing container %s: %w", short(f.ID), err)
	}
	return nil
}

// ListsCheaply is true: the listing is one call to the Docker Engine.
func (p *Provider) ListsCheaply() bool { return true }
