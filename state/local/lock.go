package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statefile"
)

// Lock file names inside the state directory.
const (
	LockFileName     = "state.lock"
	LockInfoFileName = "state.lock.info"
)

// How the lock is built (see docs/state.md):
//
// The lock is a kernel lock on DIR/state.lock: an open file description
// (OFD) lock taken with fcntl(F_OFD_SETLK) on Linux, flock(2) elsewhere.
// Both belong to the open file, not to a path, and the kernel drops them
// when the last descriptor of that open file is closed, which includes
// the process exiting for any reason (kill -9 too). The files are opened
// close-on-exec, so commands started in sandboxes never inherit them.
//
// state.lock itself is never removed or replaced: removing it while it is
// locked would let a second process create a new file and lock that one,
// giving two writers. Who holds the lock is recorded in
// DIR/state.lock.info, written after the kernel lock is taken and removed
// before it is released. Info left behind by a holder that died is
// harmless: the next Lock succeeds and overwrites it.
//
// ForceUnlock therefore never takes a lock away from a live process: it
// checks that the kernel lock is free (the holder is gone) before removing
// the leftover info, and otherwise fails naming the process to stop.
// As a further guard, a Dir that holds a lock checks before every Write
// that state.lock is still the file it locked and that the lock info
// still carries its ID; if someone removed either by hand, Write fails
// instead of writing alongside another process.

// Lock is a held state lock.
type Lock struct {
	dir  *Dir
	info state.LockInfo

	mu sync.Mutex
	f  *os.File // nil once unlocked
}

// Info returns the lock's info as recorded in state.lock.info.
func (l *Lock) Info() state.LockInfo { return l.info }

// LockPath returns the path of the lock file.
func (d *Dir) LockPath() string { return filepath.Join(d.path, LockFileName) }

// LockInfoPath returns the path of the lock info file.
func (d *Dir) LockInfoPath() string { return filepath.Join(d.path, LockInfoFileName) }

// Lock takes the state lock for one writer. info.Operation should say
// what the caller is doing; ID, Who, PID and Created are filled in when
// empty. If another process holds the lock, Lock retries with backoff
// until timeout has passed (0: fail at once) and then returns a
// *LockedError naming the holder (state.WaitLock). ctx cancels the wait.
func (d *Dir) Lock(ctx context.Context, info state.LockInfo, timeout time.Duration) (state.Lease, error) {
	if err := d.Ensure(); err != nil {
		return nil, fmt.Errorf("locking state: %w", err)
	}
	return state.WaitLock(ctx, state.NewLockInfo(info, d.version), timeout, func(info state.LockInfo) (state.Lease, error) {
		l, err := d.tryLock(ctx, info)
		if err != nil {
			return nil, err
		}
		return l, nil
	})
}

// tryLock makes one attempt. It returns a *LockedError when the lock is
// held by someone else.
func (d *Dir) tryLock(ctx context.Context, info state.LockInfo) (*Lock, error) {
	path := d.LockPath()
	for range 3 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("locking state: %w", err)
		}
		ok, err := lockFile(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking state: %w; the file system holding %s may not support locks (use a local directory for -state)", err, d.path)
		}
		if !ok {
			f.Close()
			return nil, &state.LockedError{LockFile: path, Info: state.HolderInfo(ctx, d.ReadLockInfo)}
		}
		// The file we locked must still be the one at path; otherwise
		// someone removed it between our open and lock: try again.
		if !sameFile(f, path) {
			f.Close()
			continue
		}
		data, err := json.MarshalIndent(info, "", "  ")
		if err == nil {
			err = statefile.WriteFileVisible(d.LockInfoPath(), append(data, '\n'), 0o644)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking state: recording lock info: %w", err)
		}
		l := &Lock{dir: d, info: info, f: f}
		d.mu.Lock()
		d.held = l
		d.mu.Unlock()
		return l, nil
	}
	return nil, fmt.Errorf("locking state: %s keeps being replaced; is something removing it?", path)
}

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	if err != nil {
		return false
	}
	return os.SameFile(a, b)
}

// Check verifies that the lock is still held as taken: the lock file at
// its path is the one locked and the lock info still names this lock.
func (l *Lock) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("state lock %s was already released", l.info.ID)
	}
	if !sameFile(l.f, l.dir.LockPath()) {
		return fmt.Errorf("state lock lost: %s was removed or replaced while this command held it; refusing to write state (run the command again)", l.dir.LockPath())
	}
	cur, err := l.dir.ReadLockInfo(ctx)
	if err != nil {
		return fmt.Errorf("state lock lost: %w; refusing to write state", err)
	}
	if cur == nil || cur.ID != l.info.ID {
		return fmt.Errorf("state lock lost: %s no longer names this command's lock %s; refusing to write state (run the command again)", l.dir.LockInfoPath(), l.info.ID)
	}
	return nil
}

// Unlock releases the lock: it compacts the state log into the state
// file (Dir.Write), removes the lock info, then drops the kernel lock.
// Unlocking twice is a no-op. When the compaction fails, the lock is
// released all the same and the error says so: the log still holds
// every change, and the next lock holder compacts it.
func (l *Lock) Unlock(ctx context.Context) error {
	var cerr error
	if l.held() {
		cerr = l.dir.compactLog(ctx)
	}
	err := errors.Join(cerr, l.release(ctx))
	// Lock order is Dir.mu before Lock.mu (Write checks the lock while
	// holding Dir.mu), so forget the lock only after releasing l.mu.
	l.dir.mu.Lock()
	if l.dir.held == l {
		l.dir.held = nil
	}
	l.dir.mu.Unlock()
	return err
}

// held reports whether the lock has not been released.
func (l *Lock) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f != nil
}

func (l *Lock) release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	var errs []error
	if cur, err := l.dir.ReadLockInfo(ctx); err == nil && cur != nil && cur.ID == l.info.ID {
		if err := os.Remove(l.dir.LockInfoPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := unlockFile(l.f); err != nil {
		errs = append(errs, err)
	}
	if err := l.f.Close(); err != nil {
		errs = append(errs, err)
	}
	l.f = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("releasing the state lock: %w", err)
	}
	return nil
}

// ReadLockInfo returns the recorded lock info, or nil when there is none.
func (d *Dir) ReadLockInfo(ctx context.Context) (*state.LockInfo, error) {
	data, err := os.ReadFile(d.LockInfoPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading lock info: %w", err)
	}
	var info state.LockInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%w: %w", state.ErrDamagedLockInfo, statefile.JSONError(d.LockInfoPath(), "lock info", data, err))
	}
	return &info, nil
}

// ForceUnlock removes the lock info a dead holder of the lock id left
// behind (state.ForceUnlock). The kernel lock is the truth: a holder
// that died has already lost it, and one that still holds it is alive,
// so the info is removed only while this process holds the kernel lock
// itself.
func (d *Dir) ForceUnlock(ctx context.Context, id string) error {
	return state.ForceUnlock(ctx, id, d.ReadLockInfo, d.clearLockInfo)
}

// clearLockInfo removes the lock info when the kernel lock is free, and
// otherwise returns a *state.LockHeldError.
func (d *Dir) clearLockInfo(_ context.Context, info *state.LockInfo) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	f, err := os.OpenFile(d.LockPath(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("force-unlock: %w", err)
	}
	defer f.Close()
	ok, err := lockFile(f)
	if err != nil {
		return fmt.Errorf("force-unlock: %w", err)
	}
	if !ok {
		return &state.LockHeldError{Info: info, Lock: "the lock on " + d.LockPath()}
	}
	defer unlockFile(f)
	if err := statefile.RemoveDurable(d.LockInfoPath()); err != nil {
		return fmt.Errorf("force-unlock: %w", err)
	}
	return nil
}
