package runloop

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/sandbox"
)

// Runloop's disk snapshots hold the devbox's whole disk: with
// commit_snapshot = true the engine takes one after each workspace
// snapshot (sandbox.Committer) and creates a restored devbox from it.
// The engine names snapshots by image reference
// (agentctl-snapshot/NAME:TAG); the Runloop snapshot carries it in its
// metadata (labelSnapshot) and is named agentctl-snapshot-NAME-TAG.

var (
	_ sandbox.Committer    = (*Workspace)(nil)
	_ sandbox.ImageLooker  = (*Provider)(nil)
	_ sandbox.ImageRemover = (*Provider)(nil)
)

const (
	snapshotRefPrefix = "agentctl-snapshot/"
	labelSnapshot     = "dev.agentctl.snapshot"
)

func snapshotName(ref string) (string, error) {
	rest, ok := strings.CutPrefix(ref, snapshotRefPrefix)
	if !ok || rest == "" {
		return "", fmt.Errorf("%q is not a snapshot of agentctl's (%s...)", ref, snapshotRefPrefix)
	}
	return "agentctl-snapshot-" + strings.ReplaceAll(rest, ":", "-"), nil
}

// CommitSnapshot implements registry.SnapshotCommitter.
func (s *Settings) CommitSnapshot() bool { return s != nil && s.Commit }

// Commit implements sandbox.Committer: the devbox's disk is snapshotted;
// it returns the snapshot's id.
func (w *Workspace) Commit(ctx context.Context, ref string) (string, error) {
	if !w.st.CommitSnapshot() {
		return "", fmt.Errorf("snapshot of devbox %s: disk snapshots are off; set commit_snapshot = true in the sandbox block", w.id)
	}
	name, err := snapshotName(ref)
	if err != nil {
		return "", err
	}
	meta := sandbox.Labels(w.spec, map[string]string{labelSnapshot: ref})
	snap, err := w.c.SnapshotDisk(ctx, w.id, name, meta)
	if err != nil {
		return "", err
	}
	return snap.ID, nil
}

// ImageID implements sandbox.ImageLooker: the id of the snapshot ref
// names, or an error wrapping sandbox.ErrNotFound.
func (p *Provider) ImageID(ctx context.Context, ref string) (string, error) {
	if _, err := snapshotName(ref); err != nil {
		return "", err
	}
	list, err := p.client.Snapshots(ctx, labelSnapshot, ref)
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "", fmt.Errorf("disk snapshot %q: %w", ref, sandbox.ErrNotFound)
	}
	return list[len(list)-1].ID, nil
}

// RemoveImage implements sandbox.ImageRemover: every disk snapshot of ref
// is deleted; none left is not an error.
func (p *Provider) RemoveImage(ctx context.Context, ref string) error {
	if _, err := snapshotName(ref); err != nil {
		return err
	}
	list, err := p.client.Snapshots(ctx, labelSnapshot, ref)
	if err != nil {
		return err
	}
	for _, s := range list {
		if err := p.client.DeleteSnapshot(ctx, s.ID); err != nil && !IsNotFound(err) {
			return err
		}
	}
	return nil
}
