package state

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentctl/agentctl/internal/seal"
)

// Store is where a configuration's state lives: the state and its
// changes, the lock that keeps one writer at a time, the runs' journals
// and the sandboxes' snapshots. It is the small interfaces below
// together; local.Dir (package state/local), the .agentctl directory,
// is the local Store, and pgstore.Store the PostgreSQL one. Both keep
// the same promises, which statetest.TestStore checks:
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
// Every method that reaches the storage takes a context: it carries the
// command's values, and its cancellation stops what waits (for the lock,
// for a database). A record that must be kept whatever happens (the
// state an interrupted apply leaves, the lock's release) is written
// with a context that an interrupt does not cancel
// (context.WithoutCancel).
//
// Journals are named by their paths relative to the state directory, as
// the state records them (Run.Journal). Files that stay on this machine
// (the local provider's directories, logs, caches, and snapshots while
// they are written or restored) are under Abs, the local state
// directory, whatever the store.
type Store interface {
	Reader
	Writer
	Locker
	Journals
	Snapshots

	// Abs resolves a path relative to the local state directory.
	Abs(rel string) string
	// Locate names the journal or snapshot name for messages: where the
	// store keeps it (a local path, or the name in a backend).
	Locate(name string) string
}

// Reader reads the state.
type Reader interface {
	// Read returns the latest state: an empty store gives New() (serial
	// 0, a fresh lineage, nothing written).
	Read(ctx context.Context) (*State, error)
}

// Writer records the state.
type Writer interface {
	// Write replaces the state whole and increments s.Serial; on error
	// s.Serial is unchanged.
	Write(ctx context.Context, s *State) error
	// Append records the change of the objects refs of s and increments
	// s.Serial; on error s.Serial is unchanged. A state never written is
	// written whole.
	Append(ctx context.Context, s *State, refs ...Ref) error
}

// Locker is the lock that keeps one writer at a time.
type Locker interface {
	// Lock takes the lock for info.Operation, waiting up to timeout (0:
	// not at all) while another holder has it, then failing with a
	// *LockedError naming the holder.
	Lock(ctx context.Context, info LockInfo, timeout time.Duration) (Lease, error)
	// ReadLockInfo returns the holder's info, or nil when there is none.
	ReadLockInfo(ctx context.Context) (*LockInfo, error)
	// ForceUnlock removes the info of the lock id that its holder left
	// when it died. It refuses another lock's ID, and refuses while a
	// live holder has the lock; with no lock info it is ErrNotLocked.
	ForceUnlock(ctx context.Context, id string) error
}

// Journals are the runs' append-only journals, by name.
type Journals interface {
	// OpenJournal opens the journal name for appending, creating it if
	// needed.
	OpenJournal(ctx context.Context, name string) (JournalWriter, error)
	// ReadJournal calls fn with each record of the journal name, in
	// order, and returns how many there are. A journal that does not
	// exist is an error wrapping fs.ErrNotExist; an error from fn stops
	// the read and is returned wrapped.
	ReadJournal(ctx context.Context, name string, fn func(raw json.RawMessage) error) (int, error)
	// RemoveJournal removes the journal name; a missing one is not an
	// error.
	RemoveJournal(ctx context.Context, name string) error
}

// Snapshots are the sandboxes' snapshots, named by their paths relative
// to the state directory, as the state records them (Sandbox.Snapshot).
// A snapshot is written on this machine at Abs(name), then stored with
// PutSnapshot before the state refers to it; FetchSnapshot makes it
// available at Abs(name) again before a restore (a remote store
// downloads it there; the local store has it already); CheckSnapshot
// says, without reading it, whether it can be restored from.
type Snapshots interface {
	PutSnapshot(ctx context.Context, name string) error
	FetchSnapshot(ctx context.Context, name string) error
	CheckSnapshot(ctx context.Context, name string) error
	// RemoveSnapshots removes the snapshots of the sandbox whose
	// file-safe address is base (SafeName), but keep ("" for none), and
	// name when it is not "" (a snapshot recorded under another name).
	RemoveSnapshots(ctx context.Context, base, keep, name string) error
}

// Lease is a held state lock.
type Lease interface {
	Info() LockInfo
	// Check verifies that the lock is still held.
	Check(ctx context.Context) error
	// Unlock compacts what the holder appended and releases the lock.
	Unlock(ctx context.Context) error
}

// JournalWriter appends to one open journal. Like a file's Write, its
// Append is not interrupted: it returns once the record is durable, or
// failed.
type JournalWriter interface {
	// Append records rec, returning once it is durable.
	Append(rec any) error
	// Len is the number of records in the journal.
	Len() int
	Close() error
}

// Encrypted is implemented by the stores that can encrypt at rest (local.Dir
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
