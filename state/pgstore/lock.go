package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentctl/agentctl/state"
)

// The lock is a session advisory lock (pg_try_advisory_lock) taken on a
// connection of its own, held for as long as the lease: when the holder
// dies its connection closes, its session ends and the server releases
// the lock (for a machine that vanished, once the TCP keepalives set in
// Connect give up). The lock_info row names the holder; it is written
// after the lock is taken and removed before it is released, and state
// writes made under the lock go through the lock's connection and check
// the row in their transaction.

// lease is a held lock.
type lease struct {
	s    *Store
	info state.LockInfo

	mu   sync.Mutex
	conn *pgx.Conn // nil once released
	// lost is why the lock's connection failed, found by the watchdog
	// (nil while it answers).
	lost error
	stop chan struct{}
}

// watchInterval is how often the lock's connection is checked while
// held, so that journal appends stop soon after the lock is lost.
const watchInterval = 2 * time.Second

// watch checks the lock's connection until the lease is released.
func (l *lease) watch() {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		if l.conn == nil {
			l.mu.Unlock()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := l.conn.Ping(ctx)
		cancel()
		if err != nil && l.lost == nil {
			l.lost = fmt.Errorf("state lock lost: %w", l.s.fail("the connection holding the lock", err))
		}
		l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// lostErr returns why the lock was lost, or nil.
func (l *lease) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

var _ state.Lease = (*lease)(nil)

func (l *lease) Info() state.LockInfo { return l.info }

// lockDesc says what the lock is, for messages.
func (s *Store) lockDesc() string {
	return fmt.Sprintf("the advisory lock of the %s", s.where)
}

// Lock takes the state lock, retrying with backoff until timeout (0:
// once) while another agentctl holds it, then returns a
// *state.LockedError naming the holder (state.WaitLock). The lock is
// held by a connection of its own, opened here.
func (s *Store) Lock(ctx context.Context, info state.LockInfo, timeout time.Duration) (state.Lease, error) {
	cctx, cancel := opCtx(ctx)
	conn, err := pgx.ConnectConfig(cctx, s.connCf.Copy())
	cancel()
	if err != nil {
		return nil, s.fail("locking the state", err)
	}
	l, err := state.WaitLock(ctx, state.NewLockInfo(info, s.cfg.Version), timeout, func(info state.LockInfo) (state.Lease, error) {
		l, err := s.tryLock(ctx, conn, info)
		if err != nil {
			return nil, err
		}
		return l, nil
	})
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return l, nil
}

func (s *Store) tryLock(ctx context.Context, conn *pgx.Conn, info state.LockInfo) (*lease, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, s.lockKey[0], s.lockKey[1]).Scan(&ok); err != nil {
		return nil, s.fail("locking the state", err)
	}
	if !ok {
		return nil, &state.LockedError{Lock: s.lockDesc(), Info: state.HolderInfo(ctx, s.readLockInfo)}
	}
	data, err := json.Marshal(info)
	if err == nil {
		_, err = conn.Exec(ctx, `INSERT INTO `+s.t.lockInfo+` (id, lock_id, info, backend_pid) VALUES (1, $1, $2, pg_backend_pid())
			ON CONFLICT (id) DO UPDATE SET lock_id = excluded.lock_id, info = excluded.info, backend_pid = excluded.backend_pid`,
			info.ID, data)
	}
	if err != nil {
		conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, s.lockKey[0], s.lockKey[1])
		return nil, s.fail("locking the state: recording the lock info", err)
	}
	l := &lease{s: s, info: info, conn: conn, stop: make(chan struct{})}
	s.mu.Lock()
	s.held = l
	s.mu.Unlock()
	go l.watch()
	return l, nil
}

// Check verifies that the lock is still held: its connection answers
// and the lock info names it.
func (l *lease) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return fmt.Errorf("state lock %s was already released", l.info.ID)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	var cur string
	err := l.conn.QueryRow(ctx, `SELECT lock_id FROM `+l.s.t.lockInfo+` WHERE id = 1`).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && cur != l.info.ID {
		return fmt.Errorf("state lock lost: the lock info in the %s no longer names this command's lock %s; refusing to write state (run the command again)", l.s.where, l.info.ID)
	}
	if err != nil {
		return fmt.Errorf("state lock lost: %w", l.s.fail("checking the lock's connection", err))
	}
	return nil
}

// Unlock compacts the changes appended into a whole state version,
// removes the lock info and releases the lock (closing its connection,
// which releases it even when the statements fail).
func (l *lease) Unlock(ctx context.Context) error {
	var cerr error
	if l.held() {
		if err := l.s.compact(ctx); err != nil {
			cerr = fmt.Errorf("compacting the state changes (they are kept; the next command compacts them): %w", err)
		}
	}
	err := errors.Join(cerr, l.release())
	l.s.mu.Lock()
	if l.s.held == l {
		l.s.held = nil
	}
	l.s.mu.Unlock()
	return err
}

func (l *lease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn != nil
}

func (l *lease) release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	close(l.stop)
	ctx, cancel := opCtx(context.Background())
	defer cancel()
	var errs []error
	if _, err := l.conn.Exec(ctx, `DELETE FROM `+l.s.t.lockInfo+` WHERE id = 1 AND lock_id = $1`, l.info.ID); err != nil {
		errs = append(errs, err)
	} else if _, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, l.s.lockKey[0], l.s.lockKey[1]); err != nil {
		errs = append(errs, err)
	}
	// Closing the session releases the lock whatever happened above.
	if err := l.conn.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	l.conn = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("releasing the state lock: %w (its connection is closed, which releases it)", l.s.fail("releasing the lock", err))
	}
	return nil
}

// ReadLockInfo returns the lock info, or nil when there is none.
func (s *Store) ReadLockInfo(ctx context.Context) (*state.LockInfo, error) {
	return s.readLockInfo(ctx)
}

func (s *Store) readLockInfo(ctx context.Context) (info *state.LockInfo, err error) {
	err = retry(func() error {
		info, err = s.readLockInfoOnce(ctx)
		return err
	})
	return info, err
}

func (s *Store) readLockInfoOnce(ctx context.Context) (*state.LockInfo, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT info FROM `+s.t.lockInfo+` WHERE id = 1`).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.fail("reading the lock info", err)
	}
	var info state.LockInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", s.where, state.ErrDamagedLockInfo, err)
	}
	return &info, nil
}

// lockHolder returns the server process ID of the session holding the
// advisory lock, or 0 when none does.
func (s *Store) lockHolder(ctx context.Context) (int, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	var pid int
	err := s.pool.QueryRow(ctx, `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2
		AND classid::bigint = $1 AND objid::bigint = $2
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		int64(uint32(s.lockKey[0])), int64(uint32(s.lockKey[1]))).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.fail("looking for the lock's holder", err)
	}
	return pid, nil
}

// ForceUnlock removes the lock info of lock id left by a holder that is
// gone (state.ForceUnlock): a session that still holds the advisory
// lock is a live holder.
func (s *Store) ForceUnlock(ctx context.Context, id string) error {
	return state.ForceUnlock(ctx, id, s.readLockInfo, func(ctx context.Context, info *state.LockInfo) error {
		pid, err := s.lockHolder(ctx)
		if err != nil {
			return err
		}
		if pid != 0 {
			return &state.LockHeldError{Info: info, Lock: fmt.Sprintf("%s (database session %d)", s.lockDesc(), pid)}
		}
		cctx, cancel := opCtx(ctx)
		defer cancel()
		// A damaged record (info nil) goes whatever its lock ID.
		if _, err := s.pool.Exec(cctx, `DELETE FROM `+s.t.lockInfo+` WHERE id = 1 AND (lock_id = $1 OR $2)`, id, info == nil); err != nil {
			return s.fail("force-unlock", err)
		}
		return nil
	})
}
