package daytona

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/sandbox"
)

// Import adopts an existing Daytona sandbox by id (sandbox.Importer),
// through Open. It checks the labels: agentctl's, when it has them (one
// created for another state or address is refused), and those the
// sandbox block sets. Daytona does not report the image a sandbox was
// made from reliably, so the image is not checked.
func (p *Provider) Import(ctx context.Context, spec sandbox.Spec, id string) (sandbox.Sandbox, error) {
	sb, err := p.Open(ctx, spec, sandbox.SessionState{Provider: "daytona", ID: id})
	if IsNotFound(err) {
		return nil, fmt.Errorf("no sandbox %q in Daytona: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	w := sb.(*Workspace)
	diffs := sandbox.LabelDifferences(spec, w.s.Labels)
	if w.st != nil {
		diffs = append(diffs, sandbox.ValueDifferences("label", w.s.Labels, w.st.Labels)...)
	}
	if len(diffs) > 0 {
		return nil, &sandbox.MismatchError{ID: "sandbox " + w.s.ID, Differences: diffs}
	}
	return w, nil
}
