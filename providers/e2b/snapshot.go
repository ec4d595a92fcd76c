package e2b

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/sandbox"
)

// E2B's persistent snapshots (POST /sandboxes/{id}/snapshots) are
// templates holding the whole sandbox, its files outside the workspace
// included: with commit_snapshot = true the engine takes one after each
// workspace snapshot (sandbox.Committer) and creates a restored sandbox
// from it. The engine names them by image reference
// (sandbox.SnapshotImageRef, agentctl-snapshot/NAME:TAG); E2B's snapshot
// is named agentctl-snapshot-NAME-TAG.

var (
	_ sandbox.Committer    = (*Workspace)(nil)
	_ sandbox.ImageLooker  = (*Provider)(nil)
	_ sandbox.ImageRemover = (*Provider)(nil)
)

const snapshotRefPrefix = "agentctl-snapshot/"

// snapshotName is the E2B snapshot name of an engine snapshot reference.
func snapshotName(ref string) (string, error) {
	rest, ok := strings.CutPrefix(ref, snapshotRefPrefix)
	if !ok || rest == "" {
		return "", fmt.Errorf("%q is not a snapshot of agentctl's (%s...)", ref, snapshotRefPrefix)
	}
	return "agentctl-snapshot-" + strings.ReplaceAll(rest, ":", "-"), nil
}

// CommitSnapshot implements registry.SnapshotCommitter.
func (s *Settings) CommitSnapshot() bool { return s != nil && s.Commit != nil && *s.Commit }

// Commit implements sandbox.Committer: the sandbox is snapshotted as a
// persistent E2B snapshot (E2B pauses it briefly). It returns the
// snapshot's id.
func (w *Workspace) Commit(ctx context.Context, ref string) (string, error) {
	if !w.st.CommitSnapshot() {
		return "", fmt.Errorf("snapshot of %s: whole-sandbox snapshots are off; set commit_snapshot = true in the sandbox block", w.s.where())
	}
	name, err := snapshotName(ref)
	if err != nil {
		return "", err
	}
	snap, err := w.s.CreateSnapshot(ctx, name)
	if err != nil {
		return "", err
	}
	return snap.ID, nil
}

// ImageID implements sandbox.ImageLooker: the id of the snapshot ref
// names, or an error wrapping sandbox.ErrNotFound.
func (p *Provider) ImageID(ctx context.Context, ref string) (string, error) {
	name, err := snapshotName(ref)
	if err != nil {
		return "", err
	}
	list, err := p.client.Snapshots(ctx, name)
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "", fmt.Errorf("snapshot %q: %w", name, sandbox.ErrNotFound)
	}
	return list[0].ID, nil
}

// RemoveImage implements sandbox.ImageRemover: the snapshot is deleted;
// one already gone is not an error.
func (p *Provider) RemoveImage(ctx context.Context, ref string) error {
	name, err := snapshotName(ref)
	if err != nil {
		return err
	}
	return p.client.DeleteTemplate(ctx, name)
}
