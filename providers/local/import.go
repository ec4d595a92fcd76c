package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/agentctl/agentctl/sandbox"
)

// Import adopts an existing sandbox directory of this working directory
// (sandbox.Importer): id is its path, or its name under the state
// directory's sandboxes directory as agentctl query lists it. It must
// carry the provider's marker, and the marker's lineage and address, when
// set, must be spec's.
func (p *Provider) Import(ctx context.Context, spec sandbox.Spec, id string) (sandbox.Sandbox, error) {
	if err := p.check(&spec); err != nil {
		return nil, err
	}
	dir := id
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(spec.StateDir, id)
	}
	dir = filepath.Clean(dir)
	if filepath.Dir(dir) != filepath.Clean(spec.StateDir) {
		return nil, fmt.Errorf("%s is not a sandbox directory of this working directory: local sandboxes are the directories in %s (agentctl query lists them)", id, spec.StateDir)
	}
	mk, err := readMarker(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s has no local sandbox there (no %s file in it): %w", dir, markerName, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if diffs := sandbox.LabelDifferences(spec, map[string]string{sandbox.LabelLineage: mk.Lineage, sandbox.LabelAddress: mk.Address}); len(diffs) > 0 {
		return nil, &sandbox.MismatchError{ID: dir, Differences: diffs}
	}
	data, _ := json.Marshal(sessionData{Dir: dir, Host: p.opts.Host, Isolation: p.opts.Isolation, Status: string(sandbox.StatusRunning)})
	return p.Open(ctx, spec, sandbox.SessionState{Provider: p.Kind(), ID: dir, Data: data})
}
