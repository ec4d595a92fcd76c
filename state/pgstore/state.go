package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statefile"
)

// keepVersions is how many whole state versions the backend keeps: the
// latest and, as the local store's backup does, those before it.
const keepVersions = 10

// querier is a connection or a pool.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Read returns the latest state: the latest whole version and the
// changes appended since, read in one snapshot of the database. An
// empty backend is an empty state (serial 0, a fresh lineage).
func (s *Store) Read(ctx context.Context) (*State, error) {
	return s.read(ctx)
}

// State is state.State (the alias keeps Read's signature readable).
type State = state.State

func (s *Store) read(ctx context.Context) (st *state.State, err error) {
	err = retry(func() error {
		st, err = s.readOnce(ctx)
		return err
	})
	return st, err
}

func (s *Store) readOnce(ctx context.Context) (*state.State, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, s.fail("reading the state", err)
	}
	defer tx.Rollback(context.Background())
	var data []byte
	var serial int64
	var lineage string
	err = tx.QueryRow(ctx, `SELECT serial, lineage, data FROM `+s.t.versions+` ORDER BY serial DESC LIMIT 1`).Scan(&serial, &lineage, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+s.t.changes).Scan(&n); err != nil {
			return nil, s.fail("reading the state", err)
		}
		if n > 0 {
			return nil, fmt.Errorf("%s: the backend holds %d state changes but no state version they apply to; the tables were edited by hand: restore them from a database backup", s.where, n)
		}
		return state.New(), nil
	}
	if err != nil {
		return nil, s.fail("reading the state", err)
	}
	st, err := s.openVersion(serial, lineage, data)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT serial, lineage, record FROM `+s.t.changes+` WHERE serial > $1 ORDER BY serial`, int64(st.Serial))
	if err != nil {
		return nil, s.fail("reading the state", err)
	}
	var recs [][]byte
	for rows.Next() {
		var r []byte
		if err := rows.Scan(&serial, &lineage, &r); err != nil {
			rows.Close()
			return nil, s.fail("reading the state", err)
		}
		r, err = s.open(fmt.Sprintf("the state change of serial %d in the %s", serial, s.where), kindChange, versionPlace(lineage, serial), r)
		if err != nil {
			rows.Close()
			return nil, err
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("reading the state", err)
	}
	if err := statefile.ApplyChanges(s.where, st, recs); err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	return st, nil
}

// versionPlace is the place a state version or change is sealed for:
// its state's lineage and its serial.
func versionPlace(lineage string, serial int64) seal.Place {
	return seal.Place{Lineage: lineage, Position: uint64(serial)}
}

// openVersion decrypts and decodes the state version of the row serial,
// lineage, data, and checks that it is the state version of that row.
func (s *Store) openVersion(serial int64, lineage string, data []byte) (*state.State, error) {
	where := fmt.Sprintf("the state version of serial %d in the %s", serial, s.where)
	data, err := s.open(where, kindState, versionPlace(lineage, serial), data)
	if err != nil {
		return nil, err
	}
	st, err := statefile.DecodeStateVersion(s.where, data)
	if err != nil {
		return nil, err
	}
	if st.Serial != uint64(serial) || st.Lineage != lineage {
		return nil, fmt.Errorf("%s holds the state of lineage %s and serial %d: the row was altered; restore the table from a database backup", where, st.Lineage, st.Serial)
	}
	return st, nil
}

// open is Encryption.Open for a state version or change, whose damage
// is explained.
func (s *Store) open(where, kind string, at seal.Place, data []byte) ([]byte, error) {
	plain, err := s.cfg.Encryption.Open(where, kind, at, data)
	if errors.Is(err, seal.ErrDamaged) {
		return nil, fmt.Errorf("%w, or it was moved there from another row (each is bound to its state's lineage and serial); restore the table from a database backup", err)
	}
	return plain, err
}

// writer returns where state writes go: the lock's own connection while
// this store holds the lock (a write then cannot outlive the lock: the
// session that holds it makes the write), the pool otherwise; and the
// lock ID the write must find in the lock info ("" without a lock).
// s.mu is held; the caller calls done.
func (s *Store) writer() (q querier, lockID string, done func(), err error) {
	if s.held == nil {
		return s.pool, "", func() {}, nil
	}
	l := s.held
	l.mu.Lock()
	if l.conn == nil {
		l.mu.Unlock()
		return nil, "", nil, fmt.Errorf("writing state: state lock %s was already released", l.info.ID)
	}
	return l.conn, l.info.ID, l.mu.Unlock, nil
}

// Write replaces the state whole: a new state version, in one
// transaction that also drops the changes it holds. It increments
// s.Serial; on error s.Serial is unchanged.
func (s *Store) Write(ctx context.Context, st *state.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(ctx, st)
}

func (s *Store) write(ctx context.Context, st *state.State) error {
	if err := s.checkEncryption(ctx, st.Lineage); err != nil {
		return err
	}
	data, err := statefile.EncodeStateVersion(st, s.cfg.Version)
	if err == nil {
		data, err = s.cfg.Encryption.Seal(kindState, versionPlace(st.Lineage, int64(st.Serial)), data)
	}
	if err != nil {
		st.Serial--
		return err
	}
	if err := s.writeVersion(ctx, st, data); err != nil {
		st.Serial--
		return err
	}
	return nil
}

func (s *Store) writeVersion(ctx context.Context, st *state.State, data []byte) error {
	q, lockID, done, err := s.writer()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := opCtx(ctx)
	defer cancel()
	tx, err := q.Begin(ctx)
	if err != nil {
		return s.writeFail(lockID, "writing the state", err)
	}
	defer tx.Rollback(context.Background())
	if err := s.checkLockRow(ctx, tx, lockID); err != nil {
		return err
	}
	var head int64
	if err := tx.QueryRow(ctx, `SELECT greatest(
			(SELECT coalesce(max(serial), 0) FROM `+s.t.versions+`),
			(SELECT coalesce(max(serial), 0) FROM `+s.t.changes+`))`).Scan(&head); err != nil {
		return s.writeFail(lockID, "writing the state", err)
	}
	if uint64(head) >= st.Serial {
		return fmt.Errorf("%s: writing the state: the backend's state has serial %d, newer than the one this command read and changed (serial %d): another agentctl wrote it meanwhile (was it run with -lock=false?); run the command again", s.where, head, st.Serial-1)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.t.versions+` (serial, lineage, agentctl_version, data) VALUES ($1, $2, $3, $4)`,
		int64(st.Serial), st.Lineage, st.AgentctlVersion, data); err != nil {
		return s.writeFail(lockID, "writing the state", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+s.t.changes+` WHERE serial <= $1`, int64(st.Serial)); err != nil {
		return s.writeFail(lockID, "writing the state", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+s.t.versions+` WHERE serial < (SELECT min(serial) FROM (SELECT serial FROM `+s.t.versions+` ORDER BY serial DESC LIMIT $1) k)`, keepVersions); err != nil {
		return s.writeFail(lockID, "writing the state", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.writeFail(lockID, "writing the state", err)
	}
	return nil
}

// checkLockRow checks, in the write's transaction, that the lock info
// still names the lock lockID ("" for none).
func (s *Store) checkLockRow(ctx context.Context, tx pgx.Tx, lockID string) error {
	if lockID == "" {
		return nil
	}
	var cur string
	err := tx.QueryRow(ctx, `SELECT lock_id FROM `+s.t.lockInfo+` WHERE id = 1 FOR SHARE`).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && cur != lockID {
		return fmt.Errorf("writing state: state lock lost: the lock info in the %s no longer names this command's lock %s (was it removed by hand?); refusing to write state (run the command again)", s.where, lockID)
	}
	if err != nil {
		return s.writeFail(lockID, "writing the state", err)
	}
	return nil
}

// writeFail is fail for a state write; made on the lock's connection, a
// lost connection is a lost lock.
func (s *Store) writeFail(lockID, what string, err error) error {
	if lockID != "" && unreachable(err) {
		return fmt.Errorf("writing state: state lock lost: %w; refusing to write state without it", s.fail("the connection holding the lock: "+what, err))
	}
	return s.fail(what, err)
}

// Append records the change of the objects refs of st: one row,
// committed before Append returns, whose cost is that of those objects.
// It increments st.Serial; on error st.Serial is unchanged. A state
// never written is written whole.
func (s *Store) Append(ctx context.Context, st *state.State, refs ...state.Ref) error {
	if st == nil {
		return errors.New("writing state: nil state")
	}
	if st.Serial == 0 {
		return s.Write(ctx, st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := statefile.EncodeChange(st, s.cfg.Version, refs...)
	if err == nil {
		rec, err = s.cfg.Encryption.Seal(kindChange, versionPlace(st.Lineage, int64(st.Serial+1)), rec)
	}
	if err != nil {
		return err
	}
	q, lockID, done, err := s.writer()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := opCtx(ctx)
	defer cancel()
	// One statement: it continues the latest state, or inserts nothing.
	tag, err := q.Exec(ctx, `INSERT INTO `+s.t.changes+` (serial, lineage, record)
		SELECT $1::bigint, $2::text, $3::bytea
		WHERE greatest((SELECT coalesce(max(serial), 0) FROM `+s.t.versions+`),
			(SELECT coalesce(max(serial), 0) FROM `+s.t.changes+`)) = $1::bigint - 1
		AND (SELECT lineage FROM `+s.t.versions+` ORDER BY serial DESC LIMIT 1) = $2::text
		AND ($4::text = '' OR EXISTS (SELECT 1 FROM `+s.t.lockInfo+` WHERE id = 1 AND lock_id = $4))`,
		int64(st.Serial+1), st.Lineage, rec, lockID)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return fmt.Errorf("%s: writing the state: another agentctl wrote a change of serial %d meanwhile (was it run with -lock=false?); run the command again", s.where, st.Serial+1)
		}
		return s.writeFail(lockID, "writing a state change", err)
	}
	if tag.RowsAffected() == 1 {
		st.Serial++
		return nil
	}
	return s.appendRefused(ctx, q, st, lockID)
}

// appendRefused says why Append's insert found the state not as the
// command read it.
func (s *Store) appendRefused(ctx context.Context, q querier, st *state.State, lockID string) error {
	if lockID != "" {
		var cur string
		err := q.QueryRow(ctx, `SELECT lock_id FROM `+s.t.lockInfo+` WHERE id = 1`).Scan(&cur)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && cur != lockID {
			return fmt.Errorf("writing state: state lock lost: the lock info in the %s no longer names this command's lock %s (was it removed by hand?); refusing to write state (run the command again)", s.where, lockID)
		}
	}
	var head int64
	var lineage *string
	err := q.QueryRow(ctx, `SELECT greatest((SELECT coalesce(max(serial), 0) FROM `+s.t.versions+`),
			(SELECT coalesce(max(serial), 0) FROM `+s.t.changes+`)),
		(SELECT lineage FROM `+s.t.versions+` ORDER BY serial DESC LIMIT 1)`).Scan(&head, &lineage)
	if err != nil {
		return s.fail("writing a state change", err)
	}
	if lineage == nil || *lineage != st.Lineage {
		l := "none"
		if lineage != nil {
			l = *lineage
		}
		return fmt.Errorf("%s: writing the state: the backend holds the state of lineage %s, not this command's %s: it was replaced meanwhile; run the command again", s.where, l, st.Lineage)
	}
	return fmt.Errorf("%s: writing the state: the backend's state has serial %d, not the serial %d this command read and changed: another agentctl wrote it meanwhile (was it run with -lock=false?); run the command again", s.where, head, st.Serial)
}

// pendingChanges reports whether changes follow the latest version.
func (s *Store) pendingChanges(ctx context.Context) (bool, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	var n bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.t.changes+`)`).Scan(&n); err != nil {
		return false, s.fail("reading the state", err)
	}
	return n, nil
}

// compact writes the state whole when changes follow the latest
// version, so that the next reader reads one row.
func (s *Store) compact(ctx context.Context) error {
	pending, err := s.pendingChanges(ctx)
	if err != nil || !pending {
		return err
	}
	st, err := s.read(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(ctx, st)
}
