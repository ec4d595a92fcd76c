package e2b

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/sandbox"
)

// Import adopts an existing E2B sandbox, running or paused, by id
// (sandbox.Importer), through Open. It checks the metadata: agentctl's,
// when it has it (one created for another state or address is refused),
// and the entries the sandbox block's metadata sets. The template is not
// checked: E2B reports its id, which the configuration may name by alias.
func (p *Provider) Import(ctx context.Context, spec sandbox.Spec, id string) (sandbox.Sandbox, error) {
	sb, err := p.Open(ctx, spec, sandbox.SessionState{Provider: "e2b", ID: id})
	if IsNotFound(err) {
		return nil, fmt.Errorf("no sandbox %q in E2B (a killed sandbox, or one past its timeout, is gone): %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	w := sb.(*Workspace)
	diffs := sandbox.LabelDifferences(spec, w.s.Metadata)
	if w.st != nil {
		diffs = append(diffs, sandbox.ValueDifferences("metadata entry", w.s.Metadata, w.st.Metadata)...)
	}
	if len(diffs) > 0 {
		return nil, &sandbox.MismatchError{ID: "sandbox " + w.s.ID, Differences: diffs}
	}
	return w, nil
}
