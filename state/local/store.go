package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentctl/agentctl/sandbox/archive"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statefile"
)

// snapshotsDir holds the local store's snapshots.
const snapshotsDir = "snapshots"

var (
	_ state.Store         = (*Dir)(nil)
	_ state.Lease         = (*Lock)(nil)
	_ state.JournalWriter = (*statefile.Journal)(nil)
)

// OpenJournal opens (creating it and its directory if needed) the
// journal at name, relative to the state directory, for appending.
func (d *Dir) OpenJournal(ctx context.Context, name string) (state.JournalWriter, error) {
	path := d.Abs(name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("opening journal: %w", err)
	}
	j, err := statefile.OpenSealedJournal(path, d.keys, statefile.KindJournal, d.journalBinding(name))
	if err != nil {
		return nil, err
	}
	return j, nil
}

// ReadJournal is ReadJournal for the journal at name, relative to the
// state directory.
func (d *Dir) ReadJournal(ctx context.Context, name string, fn func(raw json.RawMessage) error) (int, error) {
	return statefile.ReadSealedJournal(d.Abs(name), d.keys, statefile.KindJournal, d.journalBinding(name), fn)
}

// Locate is the absolute path of name: the local store keeps journals
// and snapshots in its directory.
func (d *Dir) Locate(name string) string { return d.Abs(name) }

// PutSnapshot stores the snapshot written at Abs(name): in the local
// store it is already where it belongs, made durable when written.
func (d *Dir) PutSnapshot(ctx context.Context, name string) error {
	return archive.CheckSnapshotFile(d.Abs(name))
}

// FetchSnapshot makes the snapshot name available at Abs(name): in the
// local store it is there, or it is lost (ErrSnapshotMissing).
func (d *Dir) FetchSnapshot(ctx context.Context, name string) error {
	return archive.CheckSnapshotFile(d.Abs(name))
}

// CheckSnapshot reports whether the snapshot name can be restored from:
// its file exists and is a regular file.
func (d *Dir) CheckSnapshot(ctx context.Context, name string) error {
	return archive.CheckSnapshotFile(d.Abs(name))
}

// RemoveSnapshots removes the snapshot files of base in the snapshots
// directory but keep, and the file name when it is not "".
func (d *Dir) RemoveSnapshots(ctx context.Context, base, keep, name string) error {
	var errs []error
	if name != "" && name != filepath.Join(snapshotsDir, keep) {
		if err := os.Remove(d.Abs(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing snapshot: %w", err))
		}
	}
	if err := archive.RemoveOldSnapshots(d.Abs(snapshotsDir), base, keep); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RemoveJournal removes the journal at name, relative to the state
// directory; a missing journal is not an error.
func (d *Dir) RemoveJournal(ctx context.Context, name string) error {
	return statefile.RemoveJournal(d.Abs(name))
}

// JournalPath returns the absolute path of a run's journal.
func (d *Dir) JournalPath(runAddress string) string {
	return d.Abs(state.JournalName(runAddress))
}
