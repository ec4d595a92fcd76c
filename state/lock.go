package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The lock of every store is built on the same rules; what differs is
// the primitive (a kernel lock on a file, an advisory lock of a
// database session) and where the holder's info is kept. WaitLock,
// HolderInfo and ForceUnlock are the part they share:
//
//   - the lock is released when its holder dies (its file closed, its
//     session ended), never by a timeout, so a lock is never taken from
//     a live holder;
//   - the holder records itself (LockInfo) right after taking the lock
//     and removes the record before releasing it; a record left by a
//     holder that died is harmless: the next holder replaces it;
//   - a command that finds the lock held waits for it, with backoff, up
//     to its timeout, and then fails naming the holder (*LockedError);
//   - force-unlock removes a dead holder's record, and refuses while the
//     holder is alive (*LockHeldError).

// LockInfo describes the holder of the state lock. It is stored as JSON in
// DIR/state.lock.info.
type LockInfo struct {
	// ID identifies this acquisition; `agentctl force-unlock ID` names it.
	ID string `json:"id"`
	// Operation is what the holder is doing: plan, apply, destroy, ...
	Operation string `json:"operation"`
	// Who is user@host.
	Who     string    `json:"who"`
	PID     int       `json:"pid"`
	Created time.Time `json:"created"`
	// Version is the holder's agentctl version, if known.
	Version string `json:"version,omitempty"`
}

// LockedError is returned when another process holds the state lock.
type LockedError struct {
	// LockFile is the path of the lock file.
	LockFile string
	// Lock describes a lock that is not a file (a remote backend's), in
	// place of LockFile.
	Lock string
	// Info describes the holder; nil when it could not be read (the holder
	// is between taking the lock and recording itself).
	Info *LockInfo
	// Waited is how long Lock retried before giving up.
	Waited time.Duration
}

func (e *LockedError) Error() string {
	var b strings.Builder
	b.WriteString("the state is locked by another agentctl")
	if e.Waited > 0 {
		fmt.Fprintf(&b, " (still locked after waiting %s)", e.Waited.Round(time.Millisecond))
	}
	if i := e.Info; i != nil {
		fmt.Fprintf(&b, ": %s (PID %d) has been running %q since %s (lock ID %s)",
			orUnknown(i.Who), i.PID, i.Operation, i.Created.UTC().Format("2006-01-02 15:04:05 MST"), i.ID)
	} else {
		b.WriteString(": the holder has not recorded itself yet")
	}
	if e.Lock != "" {
		fmt.Fprintf(&b, "; lock: %s. ", e.Lock)
	} else {
		fmt.Fprintf(&b, "; lock file %s. ", e.LockFile)
	}
	b.WriteString("To wait for it, run the command again with -lock-timeout=DURATION (e.g. -lock-timeout=5m). ")
	b.WriteString("If that process is stuck, stop it: the lock is released as soon as it exits, even if killed, and the next command replaces the lock info it left (agentctl force-unlock is not needed).")
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// ErrNotLocked is ForceUnlock's answer when the state holds no lock info:
// the lock was released (its holder exited, and a later command may
// already have taken and released the lock, clearing what was left).
var ErrNotLocked = errors.New("the state is not locked")

// fillLockInfo fills in the ID, who, the PID and the version of info
// when they are empty.
func fillLockInfo(info LockInfo, version string) LockInfo {
	if info.ID == "" {
		info.ID = uuid.NewString()
	}
	if info.Who == "" {
		info.Who = whoAmI()
	}
	if info.PID == 0 {
		info.PID = os.Getpid()
	}
	if info.Version == "" {
		info.Version = version
	}
	return info
}

func whoAmI() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = os.Getenv("USER")
	}
	if name == "" {
		name = fmt.Sprintf("uid%d", os.Getuid())
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

// WaitLock takes a store's lock the way every store does: try makes one
// attempt, returning the lease, or a *LockedError naming the holder when
// another has the lock (any other error ends the wait at once). While
// the lock is held elsewhere WaitLock tries again with backoff until
// timeout has passed (0: a single attempt), then returns the
// *LockedError with Waited set; ctx's cancellation ends the wait.
// info.Created is set at each attempt when the caller left it zero.
func WaitLock(ctx context.Context, info LockInfo, timeout time.Duration, try func(LockInfo) (Lease, error)) (Lease, error) {
	start := time.Now()
	backoff := 25 * time.Millisecond
	setCreated := info.Created.IsZero()
	for {
		if setCreated {
			info.Created = time.Now().UTC()
		}
		l, err := try(info)
		if err == nil {
			return l, nil
		}
		var le *LockedError
		if !errors.As(err, &le) {
			return nil, err
		}
		remaining := timeout - time.Since(start)
		if remaining <= 0 {
			if timeout > 0 {
				le.Waited = timeout
			}
			return nil, le
		}
		wait := min(backoff, remaining)
		backoff = min(backoff*2, time.Second)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for the state lock: %w (%v)", ctx.Err(), le)
		case <-t.C:
		}
	}
}

// HolderInfo reads the holder's info for a *LockedError with read. The
// holder records itself right after taking the lock: a read that finds
// no info (or fails) is tried again a few times, 10 ms apart, before
// giving up with nil.
func HolderInfo(ctx context.Context, read func(context.Context) (*LockInfo, error)) *LockInfo {
	for range 5 {
		info, err := read(ctx)
		if err == nil && info != nil {
			return info
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// ErrDamagedLockInfo is wrapped by a store's ReadLockInfo when the
// holder's record is there but cannot be decoded.
var ErrDamagedLockInfo = errors.New("the lock info is damaged")

// LockHeldError is ForceUnlock's refusal while the holder of the lock
// is alive.
type LockHeldError struct {
	// Info describes the holder; nil when its record is damaged.
	Info *LockInfo
	// Lock says what is held: "the lock on PATH", "the advisory lock of
	// ... (database session N)".
	Lock string
}

func (e *LockHeldError) Error() string {
	who := "the holder"
	if i := e.Info; i != nil {
		who = fmt.Sprintf("%s (PID %d, running %q)", orUnknown(i.Who), i.PID, i.Operation)
	}
	return fmt.Sprintf("force-unlock: %s still holds %s, so it is still running; refusing to let a second writer in. Stop that process (the lock is released as soon as it exits, even if killed) and the state is unlocked", who, e.Lock)
}

// ForceUnlock removes the record a dead holder of the lock id left, the
// way every store does it: read reads the record; an ID that is not
// the recorded one is refused, naming the holder; no record at all is
// ErrNotLocked. clear removes the record when no live holder has the
// lock, and otherwise returns a *LockHeldError. A damaged record
// (ErrDamagedLockInfo) is removed too, once clear finds the lock free.
func ForceUnlock(ctx context.Context, id string, read func(context.Context) (*LockInfo, error), clear func(context.Context, *LockInfo) error) error {
	info, err := read(ctx)
	switch {
	case errors.Is(err, ErrDamagedLockInfo):
		info = nil
	case err != nil:
		return fmt.Errorf("force-unlock: %w", err)
	case info == nil:
		return ErrNotLocked
	case info.ID != id:
		return fmt.Errorf("force-unlock: lock ID %q does not match the current lock (ID %s, held by %s for %q); copy the ID from the lock error message",
			id, info.ID, orUnknown(info.Who), info.Operation)
	}
	return clear(ctx, info)
}

// NewLockInfo fills in what Lock fills in when info leaves it empty:
// the ID, who, the PID and the version (Created is the caller's).
func NewLockInfo(info LockInfo, version string) LockInfo {
	return fillLockInfo(info, version)
}
