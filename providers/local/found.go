package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentctl/agentctl/sandbox"
)

// FindManaged lists the sandbox directories under stateDir that carry
// this provider's marker, of every lineage (sandbox.Lister).
func (p *Provider) FindManaged(_ context.Context, stateDir string) ([]sandbox.Found, error) {
	if stateDir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the sandbox directories in %s: %w", stateDir, err)
	}
	var out []sandbox.Found
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(stateDir, e.Name())
		mk, err := readMarker(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not a sandbox directory
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sandbox.Found{ID: dir, Name: e.Name(), Lineage: mk.Lineage, Address: mk.Address})
	}
	return out, nil
}

// DeleteFound removes a sandbox directory FindManaged listed: it must sit
// directly under stateDir and still carry the marker.
func (p *Provider) DeleteFound(_ context.Context, stateDir string, f sandbox.Found) error {
	if stateDir == "" || filepath.Dir(filepath.Clean(f.ID)) != filepath.Clean(stateDir) {
		return fmt.Errorf("refusing to remove %s: it is not a sandbox directory of %s", f.ID, stateDir)
	}
	if _, err := readMarker(f.ID); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone already
		}
		return err
	}
	if err := removeTree(f.ID); err != nil {
		return fmt.Errorf("removing sandbox directory %s: %w", f.ID, err)
	}
	return nil
}

// ListsCheaply is true: the listing reads one directory.
func (p *Provider) ListsCheaply() bool { return true }

// readMarker reads the marker of the sandbox directory dir; an error
// wrapping fs.ErrNotExist when dir has none.
func readMarker(dir string) (marker, error) {
	var mk marker
	b, err := os.ReadFile(filepath.Join(dir, markerName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return mk, err
		}
		return mk, fmt.Errorf("reading the marker of sandbox directory %s: %w", dir, err)
	}
	if err := json.Unmarshal(b, &mk); err != nil {
		return mk, fmt.Errorf("the marker of sandbox directory %s is unreadable (%v): remove the directory by hand if nothing in it is needed", dir, err)
	}
	return mk, nil
}
