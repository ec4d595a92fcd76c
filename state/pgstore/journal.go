package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
)

// A journal is a row in journals (it exists, even with no records) and
// one row per record in journal_records, numbered from 1. Append commits
// its row before returning; a crash cannot tear it. When the outcome of
// an insert is unknown (the connection was lost during it), Append tries
// again a bounded number of times: the row's primary key makes the retry
// either insert it or find it there already (with the same bytes).

// journalRetries are the waits before Append's retries.
var journalRetries = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}

type journal struct {
	s    *Store
	name string

	mu sync.Mutex
	n  int64
	// lineage is the lineage of the state the records are bound to,
	// looked up at the first sealed append ("" before).
	lineage string
	broken  error
	closed  bool
}

// recordPlace is the place a journal record is sealed for: the lineage
// of the state, the journal's name and the record's number.
func recordPlace(lineage, name string, seq int64) seal.Place {
	return seal.Place{Lineage: lineage, Name: name, Position: uint64(seq)}
}

// stateBinding returns the lineage of the latest state version ("" when
// there is none) and whether the store is strict: the version was
// written encrypted with places and the store encrypts, so every
// journal record was converted to that form then, and a record in
// another form (plaintext, or sealed without its place) was put there.
func (s *Store) stateBinding(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (lineage string, strict bool, err error) {
	var head []byte
	row := q.QueryRow(ctx, `SELECT lineage, substring(data from 1 for 5) FROM `+s.t.versions+` ORDER BY serial DESC LIMIT 1`)
	err = row.Scan(&lineage, &head)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.fail("reading the state's lineage", err)
	}
	return lineage, seal.Bound(head) && s.cfg.Encryption.Encrypting(), nil
}

var _ state.JournalWriter = (*journal)(nil)

// OpenJournal opens (creating it if needed) the journal name.
func (s *Store) OpenJournal(ctx context.Context, name string) (state.JournalWriter, error) {
	var n int64
	err := retry(func() error {
		ctx, cancel := opCtx(ctx)
		defer cancel()
		if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.t.journals+` (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, name); err != nil {
			return s.fail("opening journal "+name, err)
		}
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM `+s.t.records+` WHERE name = $1`, name).Scan(&n); err != nil {
			return s.fail("opening journal "+name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &journal{s: s, name: name, n: n}, nil
}

// Len is the number of records.
func (j *journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return int(j.n)
}

// Append records rec, returning once its row is committed.
func (j *journal) Append(rec any) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("journal %s: encoding record: %w", j.name, err)
	}
	if len(data) > state.MaxJournalRecord {
		return fmt.Errorf("journal %s: record of %d bytes exceeds the %d byte limit", j.name, len(data), state.MaxJournalRecord)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return fmt.Errorf("journal %s: closed", j.name)
	}
	if j.broken != nil {
		return j.broken
	}
	if err := j.s.leaseLost(); err != nil {
		// Another agentctl may hold the lock now and resume this run:
		// stop writing its journal.
		return fmt.Errorf("journal %s: %w", j.name, err)
	}
	seq := j.n + 1
	if data, err = j.seal(seq, data); err != nil {
		return err
	}
	var last error
	for attempt := 0; ; attempt++ {
		last = j.insert(seq, data)
		if last == nil {
			j.n = seq
			return nil
		}
		if !unreachable(last) || attempt == len(journalRetries) {
			break
		}
		time.Sleep(journalRetries[attempt])
	}
	if !unreachable(last) {
		// Not a lost connection: the journal is no longer what this
		// writer thinks (another writer appended), so it stops.
		j.broken = last
	}
	return last
}

// seal returns record seq's data as stored: sealed for its place when
// the store encrypts. j.mu is held.
func (j *journal) seal(seq int64, data []byte) ([]byte, error) {
	if !j.s.cfg.Encryption.Encrypting() {
		return data, nil
	}
	if j.lineage == "" {
		ctx, cancel := opCtx(context.Background())
		defer cancel()
		lineage, _, err := j.s.stateBinding(ctx, j.s.pool)
		if err != nil {
			return nil, fmt.Errorf("journal %s: %w", j.name, err)
		}
		if lineage == "" {
			return nil, fmt.Errorf("%s: journal %s: its records are bound to the state it belongs to, and no state is written yet", j.s.where, j.name)
		}
		j.lineage = lineage
	}
	data, err := j.s.cfg.Encryption.Seal(kindJournal, recordPlace(j.lineage, j.name, seq), data)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", j.name, err)
	}
	return data, nil
}

func (j *journal) insert(seq int64, data []byte) error {
	ctx, cancel := opCtx(context.Background())
	defer cancel()
	_, err := j.s.pool.Exec(ctx, `INSERT INTO `+j.s.t.records+` (name, seq, record) VALUES ($1, $2, $3)`, j.name, seq, data)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		// The row is there: an earlier attempt committed it before its
		// connection was lost, or another writer appended.
		var have []byte
		if qerr := j.s.pool.QueryRow(ctx, `SELECT record FROM `+j.s.t.records+` WHERE name = $1 AND seq = $2`, j.name, seq).Scan(&have); qerr == nil && bytes.Equal(have, data) {
			return nil
		}
		return fmt.Errorf("%s: journal %s: record %d was written by another agentctl meanwhile; this command stops writing it (is another apply running with -lock=false?)", j.s.where, j.name, seq)
	}
	if errors.As(err, &pe) && pe.Code == "23503" {
		return fmt.Errorf("%s: journal %s was removed while this command wrote it", j.s.where, j.name)
	}
	if err != nil {
		return j.s.fail(fmt.Sprintf("journal %s: appending record %d", j.name, seq), err)
	}
	return nil
}

// Close closes the writer; the journal stays.
func (j *journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	return nil
}

// ReadJournal calls fn with each record of the journal name, in order,
// and returns how many there are. A journal that does not exist is an
// error wrapping fs.ErrNotExist.
func (s *Store) ReadJournal(ctx context.Context, name string, fn func(raw json.RawMessage) error) (n int, err error) {
	// Retried only while no record was passed to fn.
	err = retry(func() error {
		n, err = s.readJournal(ctx, name, fn)
		if n > 0 && err != nil && retryable(err) {
			return fmt.Errorf("journal %s: the connection was lost while reading it: %w", name, errNoRetry{err})
		}
		return err
	})
	return n, err
}

// errNoRetry hides a retryable error from retry.
type errNoRetry struct{ err error }

func (e errNoRetry) Error() string { return e.err.Error() }

func (s *Store) readJournal(ctx context.Context, name string, fn func(raw json.RawMessage) error) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*opTimeout)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, s.fail("reading journal "+name, err)
	}
	defer tx.Rollback(context.Background())
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.t.journals+` WHERE name = $1)`, name).Scan(&exists); err != nil {
		return 0, s.fail("reading journal "+name, err)
	}
	if !exists {
		return 0, fmt.Errorf("reading journal: %s: journal %s: %w", s.where, name, fs.ErrNotExist)
	}
	lineage, strict, err := s.stateBinding(ctx, tx)
	if err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, `SELECT seq, record FROM `+s.t.records+` WHERE name = $1 ORDER BY seq`, name)
	if err != nil {
		return 0, s.fail("reading journal "+name, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var seq int64
		var raw []byte
		if err := rows.Scan(&seq, &raw); err != nil {
			return n, s.fail("reading journal "+name, err)
		}
		if seq != int64(n+1) {
			return n, fmt.Errorf("%s: journal %s: record %d is missing (the next one is record %d): rows were removed; restore the table from a database backup, or start its run over (apply -replace)", s.where, name, n+1, seq)
		}
		n++
		if fn != nil {
			raw, err := s.openRecord(name, lineage, strict, seq, raw)
			if err != nil {
				return n - 1, err
			}
			if err := fn(json.RawMessage(raw)); err != nil {
				return n, fmt.Errorf("journal %s: record %d: %w", name, n, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, s.fail("reading journal "+name, err)
	}
	return n, nil
}

// openRecord returns the plaintext of the record seq of the journal
// name, sealed for its place in the state of lineage; strict refuses a
// record in another form (stateBinding).
func (s *Store) openRecord(name, lineage string, strict bool, seq int64, raw []byte) ([]byte, error) {
	what := fmt.Sprintf("%s: journal %s: record %d", s.where, name, seq)
	hint := "restore the table from a database backup, or start its run over (apply -replace)"
	if strict && !seal.Bound(raw) {
		return nil, fmt.Errorf("%s is not encrypted with its place, but the state is, and every journal record was encrypted so when it was: the row was put there since; %s", what, hint)
	}
	plain, err := s.cfg.Encryption.Open(what, kindJournal, recordPlace(lineage, name, seq), raw)
	if errors.Is(err, seal.ErrDamaged) {
		return nil, fmt.Errorf("%w, or it was moved there from another position, journal or state (each encrypted record is bound to its state's lineage, its journal and its position in it); %s", err, hint)
	}
	return plain, err
}

// RemoveJournal removes the journal name; a missing one is not an error.
func (s *Store) RemoveJournal(ctx context.Context, name string) error {
	return retry(func() error {
		ctx, cancel := opCtx(ctx)
		defer cancel()
		if _, err := s.pool.Exec(ctx, `DELETE FROM `+s.t.journals+` WHERE name = $1`, name); err != nil {
			return s.fail("removing journal "+name, err)
		}
		return nil
	})
}

// ImportJournal replaces the journal name with records, in one
// transaction (agentctl init -migrate-state moves local journals with
// it); encrypted, they are bound to the state of lineage, which is
// written after them.
func (s *Store) ImportJournal(ctx context.Context, lineage, name string, records [][]byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*opTimeout)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.fail("importing journal "+name, err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `DELETE FROM `+s.t.journals+` WHERE name = $1`, name); err != nil {
		return s.fail("importing journal "+name, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.t.journals+` (name) VALUES ($1)`, name); err != nil {
		return s.fail("importing journal "+name, err)
	}
	rows := make([][]any, len(records))
	for i, r := range records {
		r, err := s.cfg.Encryption.Seal(kindJournal, recordPlace(lineage, name, int64(i+1)), r)
		if err != nil {
			return err
		}
		rows[i] = []any{name, int64(i + 1), r}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.cfg.Schema, "journal_records"}, []string{"name", "seq", "record"}, pgx.CopyFromRows(rows)); err != nil {
		return s.fail("importing journal "+name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.fail("importing journal "+name, err)
	}
	return nil
}

// leaseLost returns why the lock this store holds was lost, or nil (also
// when it holds none).
func (s *Store) leaseLost() error {
	s.mu.Lock()
	l := s.held
	s.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.lostErr()
}
