package state

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentctl/agentctl/internal/seal"
)

// Store is where a configuration's state lives: the state and its
// changes, the lock that keeps one writer at a time, the runs' journals
// and the sandboxes' snapshots. local.Dir, the .agentctl directory, is the local Store; a remote
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
// (the local provider's directories, logs, caches, and snapshots while
// they are written or restored) are under Abs, the local state
// directory, whatever the store.
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

	// Snapshots are named by their paths relative to the state
	// directory, as the state records them (Sandbox.Snapshot). A
	// snapshot is written on this machine at Abs(name), then stored with
	// PutSnapshot before the state refers to it; FetchSnapshot makes it
	// available at Abs(name) again before a restore (a remote store
	// downloads it there; the local store has it already); CheckSnapshot
	// says, without reading it, whether it can be restored from.
	PutSnapshot(ctx context.Context, name string) error
	FetchSnapshot(ctx context.Context, name string) error
	CheckSnapshot(ctx context.Context, name string) error
	// RemoveSnapshots removes the snapshots of the sandbox whose
	// file-safe address is base (SafeName), but keep ("" for none), and
	// name when it is not "" (a snapshot recorded under another name).
	RemoveSnapshots(ctx context.Context, base, keep, name string) error

	// Abs resolves a path relative to the local state directory.
	Abs(rel string) string
	// Locate names the journal or snapshot name for messages: where the
	// store keeps it (a local path, or the name in a backend).
	Locate(name string) string
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

// Encrypted is implemented by the stores that can encrypt at rest (Dir
// and the PostgreSQL backend): Encryption is their setting, nil for
// none. The store encrypts the state and the journals itself; the
// engine writes and reads snapshots on this machine with its keys
// (archive.SnapshotOptions.Key), and the store keeps them as written.
type Encrypted interface {
	Encryption() *seal.Keys
}

// EncryptionOf returns the encryption setting of s: nil when it has none
// or cannot encrypt.
func EncryptionOf(s Store) *seal.Keys {
	if e, ok := s.(Encrypted); ok {
		return e.Encryption()
	}
	return nil
}

// EncodingReporter is a store that can say, before a write, that the
// state it holds is stored with another encryption setting than the
// configured one, so that the next whole write converts it (with its
// journals and snapshots): encrypting a state written before the key was
// configured, decrypting one under decrypt = true, binding records
// written by an agentctl that did not. An apply with nothing else to do
// still writes the state then (docs/security.md).
type EncodingReporter interface {
	// PendingConversion says what the next write does to the stored
	// state ("encrypts", "decrypts", "binds each record to its place"),
	// or "" when it is stored as configured.
	PendingConversion(ctx context.Context) (string, error)
}
