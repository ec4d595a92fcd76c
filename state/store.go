package state

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Store is where a configuration's state lives: the state and its
// changes, the lock that keeps one writer at a time, and the runs'
// journals. Dir, the .agentctl directory, is the local Store; a remote
// backend implements the same methods with the same promises:
//
//   - Read returns the latest acknowledged state, whole, or a clear error
//     (a newer format refused with a *NewerFormatError);
//   - Write replaces the state whole and atomically, incrementing its
//     serial; Append records the change of the objects named, durably,
//     at the cost of those objects, incrementing the serial; a reader
//     sees a change whole or not at all;
//   - Lock is held by one command at a time, released when its holder
//     dies, and names its holder to the others (*LockedError); a Lease
//     whose lock was lost refuses Write and Append;
//   - a journal's Append returns once its record is durable, and a crash
//     tears at most the last record, which readers ignore.
//
// Journals are named by their paths relative to the state directory, as
// the state records them (Run.Journal). Files that stay on this machine
// (sandbox snapshots, the local provider's directories, logs and caches)
// are under Abs, the local state directory, whatever the store.
type Store interface {
	Read() (*State, error)
	Write(s *State) error
	Append(s *State, refs ...Ref) error

	Lock(ctx context.Context, info LockInfo, timeout time.Duration) (Lease, error)
	ReadLockInfo() (*LockInfo, error)
	ForceUnlock(id string) error

	OpenJournal(name string) (JournalWriter, error)
	ReadJournal(name string, fn func(raw json.RawMessage) error) (int, error)
	RemoveJournal(name string) error

	// Abs resolves a path relative to the local state directory.
	Abs(rel string) string
}

// Lease is a held state lock.
type Lease interface {
	Info() LockInfo
	// Check verifies that the lock is still held.
	Check() error
	// Unlock compacts what the holder appended and releases the lock.
	Unlock() error
}

// JournalWriter appends to one journal.
type JournalWriter interface {
	// Append records rec, returning once it is durable.
	Append(rec any) error
	// Len is the number of records in the journal.
	Len() int
	Close() error
}

var (
	_ Store         = (*Dir)(nil)
	_ Lease         = (*Lock)(nil)
	_ JournalWriter = (*Journal)(nil)
)

// OpenJournal opens (creating it and its directory if needed) the
// journal at name, relative to the state directory, for appending.
func (d *Dir) OpenJournal(name string) (JournalWriter, error) {
	path := d.Abs(name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("opening journal: %w", err)
	}
	j, err := OpenJournal(path)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// ReadJournal is ReadJournal for the journal at name, relative to the
// state directory.
func (d *Dir) ReadJournal(name string, fn func(raw json.RawMessage) error) (int, error) {
	return ReadJournal(d.Abs(name), fn)
}

// RemoveJournal removes the journal at name, relative to the state
// directory; a missing journal is not an error.
func (d *Dir) RemoveJournal(name string) error {
	return RemoveJournal(d.Abs(name))
}
