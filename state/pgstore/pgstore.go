// Package pgstore is the PostgreSQL state backend (backend "pg" in the
// agentctl block): a state.Store whose state, lock, journals and
// snapshots live in tables of one schema of a PostgreSQL database, so
// that several machines share them (docs/backends.md).
//
// The state is a table of whole state versions (Write) and a table of
// changes since the latest one (Append: one row per change, the state
// log's record, committed before Append returns); Read takes both in
// one snapshot of the database, so it sees a change whole or not at
// all. The lock is a session advisory lock held by a connection of its
// own for as long as the lease (a client that dies loses its session,
// and the lock with it) plus a row naming the holder. A journal is a
// row per record, committed per Append, so a crash cannot tear one. A
// snapshot is rows of chunks written in one transaction, streamed from
// and to the local file at Abs(name).
//
// The connection string is a secret: it is never stored, and errors are
// scrubbed of it and of its password.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

// DefaultSchema is the schema used when the configuration names none.
const DefaultSchema = "agentctl"

// opTimeout bounds one operation of the store against the database
// (a statement, or a transaction of a few), so that a database that went
// away fails the command instead of hanging it.
const opTimeout = 30 * time.Second

// Config says where the backend is.
type Config struct {
	// ConnString is a PostgreSQL connection string (URL or key=value);
	// empty, the standard PG* environment variables say everything.
	ConnString string
	// Schema holds the backend's tables (DefaultSchema when empty).
	Schema string
	// Version is the agentctl version recorded in what is written.
	Version string
	// Local is the local state directory: Abs, and where snapshots are
	// written before PutSnapshot and fetched to by FetchSnapshot.
	Local *local.Dir
	// Encryption encrypts the state versions, the changes and the
	// journal records in their rows (nil for none); snapshots are
	// stored as written, encrypted by whoever wrote them with the same
	// setting (Encryption).
	Encryption *seal.Keys
}

// Encryption returns the store's encryption setting (nil for none).
func (s *Store) Encryption() *seal.Keys { return s.cfg.Encryption }

// Store is the PostgreSQL state.Store.
type Store struct {
	cfg    Config
	pool   *pgxpool.Pool
	connCf *pgx.ConnConfig
	scrub  *scrubber
	t      tables
	// lockKey is the advisory lock's key pair: a constant, and the
	// schema name's hash, so schemas of one database lock apart.
	lockKey [2]int32
	where   string // "pg backend (schema "x", database "y")"

	mu   sync.Mutex // serializes Write and Append; guards held
	held *lease
}

var _ state.Store = (*Store)(nil)

// ErrNotInitialized is returned (wrapped) by Open when the backend's
// schema has not been created, or is older than this agentctl's: run
// agentctl init.
var ErrNotInitialized = errors.New("the backend has not been initialized")

// Connect connects to the database without checking the schema (init
// uses it before Migrate). Close releases the connections.
func Connect(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if cfg.Local == nil {
		return nil, errors.New("pg backend: no local state directory")
	}
	sc := newScrubber(cfg.ConnString)
	pcfg, err := pgxpool.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("pg backend: the connection string (conn_str, or the PG* environment variables) is not valid: %w", sc.err(err))
	}
	sc.add(pcfg.ConnConfig.Password)
	cc := pcfg.ConnConfig
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = 10 * time.Second
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["application_name"] = "agentctl"
	// The server notices a client that vanished (its machine lost power,
	// the network went) within about 30 s and ends its session, which
	// releases the lock it held.
	for k, v := range map[string]string{"tcp_keepalives_idle": "15", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"} {
		if _, ok := cc.RuntimeParams[k]; !ok {
			cc.RuntimeParams[k] = v
		}
	}
	pcfg.MaxConns = 8
	pcfg.MinConns = 0
	// A connection that saw an error is not reused.
	pcfg.HealthCheckPeriod = 5 * time.Second
	s := &Store{
		cfg:    cfg,
		connCf: cc.Copy(),
		scrub:  sc,
		t:      newTables(cfg.Schema),
		where:  fmt.Sprintf("pg backend (schema %q, database %q)", cfg.Schema, cc.Database),
	}
	h := fnv.New32a()
	h.Write([]byte(cc.Database + "\x00" + cfg.Schema))
	s.lockKey = [2]int32{0x61677463, int32(h.Sum32() & 0x7fffffff)}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, s.fail("connecting", err)
	}
	s.pool = pool
	if err := s.ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// ping checks that the database answers, trying a bounded number of
// times (a database restarting refuses connections for a moment).
func (s *Store) ping(ctx context.Context) error {
	var err error
	for i, wait := range []time.Duration{0, 250 * time.Millisecond, time.Second, 2 * time.Second} {
		if wait > 0 {
			select {
			case <-ctx.Done():
				return s.fail("connecting", ctx.Err())
			case <-time.After(wait):
			}
		}
		c, cancel := context.WithTimeout(ctx, opTimeout)
		err = s.pool.Ping(c)
		cancel()
		if err == nil || !retryable(err) || i == 3 {
			break
		}
	}
	if err != nil {
		return s.fail("connecting", err)
	}
	return nil
}

// Open connects to the backend and checks that init created its
// schema at this agentctl's version.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s, err := Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	v, err := s.SchemaVersion(ctx)
	if err == nil {
		switch {
		case v == 0:
			err = fmt.Errorf("%s: %w: run agentctl init to create its tables (and -migrate-state to move a local state into it)", s.where, ErrNotInitialized)
		case v < schemaVersion:
			err = fmt.Errorf("%s: %w at this agentctl's version (schema version %d, this agentctl uses %d): run agentctl init to upgrade it", s.where, ErrNotInitialized, v, schemaVersion)
		case v > schemaVersion:
			err = fmt.Errorf("%s: the backend's schema was upgraded by a newer agentctl (schema version %d, this agentctl knows %d); upgrade agentctl", s.where, v, schemaVersion)
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Where describes the backend for messages (never the connection
// string).
func (s *Store) Where() string { return s.where }

// Close releases the store's connections (and a lock still held).
func (s *Store) Close() {
	s.mu.Lock()
	l := s.held
	s.mu.Unlock()
	if l != nil {
		l.release()
	}
	s.pool.Close()
}

// Abs resolves a path relative to the local state directory.
func (s *Store) Abs(rel string) string { return s.cfg.Local.Abs(rel) }

// Locate names a journal or snapshot kept in the backend, for messages.
func (s *Store) Locate(name string) string { return name + " in the " + s.where }

// Local returns the local state directory.
func (s *Store) Local() *local.Dir { return s.cfg.Local }

// opCtx returns a context bounding one operation.
func opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, opTimeout)
}

// fail wraps an error of the database for what (an operation), scrubbed
// of the connection string, saying when the database could not be
// reached.
func (s *Store) fail(what string, err error) error {
	err = s.scrub.err(err)
	if unreachable(err) {
		return fmt.Errorf("%s: %s: the database could not be reached or the connection was lost (%w); what was committed before is kept: run the command again once the database is reachable", s.where, what, err)
	}
	return fmt.Errorf("%s: %s: %w", s.where, what, err)
}

// unreachable reports an error that says the database could not be
// reached or the connection was lost, rather than that it refused what
// was asked.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01..57P03: the server is
		// shutting down or starting.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ne) || errors.As(err, &ce) || errors.Is(err, context.DeadlineExceeded) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err) || strings.Contains(err.Error(), "conn closed") ||
		strings.Contains(err.Error(), "unexpected EOF")
}

// retryable reports an error after which the statement may be made
// again: the connection failed (SafeToRetry: nothing was sent) or could
// not be made.
func retryable(err error) bool {
	return unreachable(err)
}

// retryWaits are the waits before the retries of an operation that may
// be made again (a read, an idempotent write) when the connection
// failed: a pooled connection the database closed when it restarted
// fails once, and a restarting database refuses connections for a
// moment. Bounded: then the error is the operation's.
var retryWaits = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}

// retry runs fn, an operation that may be made again, retrying it
// (boundedly) while its error says the database could not be reached.
func retry(fn func() error) error {
	err := fn()
	for _, wait := range retryWaits {
		if err == nil || !retryable(err) {
			return err
		}
		time.Sleep(wait)
		err = fn()
	}
	return err
}

// scrubber removes secrets from error messages.
type scrubber struct {
	secrets []string
}

func newScrubber(connString string) *scrubber {
	sc := &scrubber{}
	sc.add(connString)
	return sc
}

func (sc *scrubber) add(secret string) {
	if len(secret) >= 3 {
		sc.secrets = append(sc.secrets, secret)
	}
}

func (sc *scrubber) text(s string) string {
	for _, sec := range sc.secrets {
		s = strings.ReplaceAll(s, sec, "(redacted)")
	}
	return s
}

// err returns err with a message scrubbed of the secrets; errors.Is and
// errors.As still see the original.
func (sc *scrubber) err(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := sc.text(msg)
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
