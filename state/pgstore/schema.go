package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// tables are the quoted, schema-qualified names of the backend's tables.
type tables struct {
	schema, migrations, versions, changes, lockInfo, journals, records, snapshots, chunks string
}

func newTables(schema string) tables {
	q := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	return tables{
		schema:     pgx.Identifier{schema}.Sanitize(),
		migrations: q("schema_migrations"),
		versions:   q("state_versions"),
		changes:    q("state_changes"),
		lockInfo:   q("lock_info"),
		journals:   q("journals"),
		records:    q("journal_records"),
		snapshots:  q("snapshots"),
		chunks:     q("snapshot_chunks"),
	}
}

// migrations are the schema's versions, in order: migration i makes the
// schema version i+1. A migration is never changed once released; a
// change of the schema is a new one.
func (t tables) migrationSQL() []string {
	return []string{
		// 1: the state, the lock info, journals and snapshots.
		`CREATE TABLE {versions} (
			serial bigint PRIMARY KEY,
			lineage text NOT NULL,
			agentctl_version text NOT NULL,
			data bytea NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now()
		);
		CREATE TABLE {changes} (
			serial bigint PRIMARY KEY,
			lineage text NOT NULL,
			record bytea NOT NULL
		);
		CREATE TABLE {lock_info} (
			id int PRIMARY KEY CHECK (id = 1),
			lock_id text NOT NULL,
			info jsonb NOT NULL,
			backend_pid int NOT NULL
		);
		CREATE TABLE {journals} (
			name text PRIMARY KEY,
			created_at timestamptz NOT NULL DEFAULT now()
		);
		CREATE TABLE {records} (
			name text NOT NULL REFERENCES {journals} (name) ON DELETE CASCADE,
			seq bigint NOT NULL,
			record bytea NOT NULL,
			PRIMARY KEY (name, seq)
		);
		CREATE TABLE {snapshots} (
			name text PRIMARY KEY,
			size bigint NOT NULL,
			sha256 text NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now()
		);
		CREATE TABLE {chunks} (
			name text NOT NULL REFERENCES {snapshots} (name) ON DELETE CASCADE,
			seq int NOT NULL,
			data bytea NOT NULL,
			PRIMARY KEY (name, seq)
		);
		-- Snapshots are tar files, mostly compressed already: no
		-- compression, no wasted time.
		ALTER TABLE {chunks} ALTER COLUMN data SET STORAGE EXTERNAL;`,
	}
}

// schemaVersion is the schema version this agentctl uses.
const schemaVersion = 1

func (t tables) expand(sql string) string {
	return strings.NewReplacer(
		"{versions}", t.versions, "{changes}", t.changes, "{lock_info}", t.lockInfo,
		"{journals}", t.journals, "{records}", t.records, "{snapshots}", t.snapshots,
		"{chunks}", t.chunks,
	).Replace(sql)
}

// SchemaVersion returns the version of the backend's schema: 0 when init
// has not created it.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	var v int
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s.t.migrations).Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") {
		return 0, nil // undefined table or schema
	}
	if err != nil {
		return 0, s.fail("reading the schema version", err)
	}
	return v, nil
}

// Migrate creates the backend's schema, or brings it to this agentctl's
// version, and returns the versions before and after. Concurrent
// migrations wait for each other (a transaction advisory lock).
func (s *Store) Migrate(ctx context.Context) (from, to int, err error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, 0, s.fail("creating the schema", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, s.lockKey[0]+1, s.lockKey[1]); err != nil {
		return 0, 0, s.fail("creating the schema", err)
	}
	stmts := []string{
		`CREATE SCHEMA IF NOT EXISTS ` + s.t.schema,
		`CREATE TABLE IF NOT EXISTS ` + s.t.migrations + ` (
			version int PRIMARY KEY,
			agentctl_version text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`,
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return 0, 0, s.fail("creating the schema", err)
		}
	}
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s.t.migrations).Scan(&from); err != nil {
		return 0, 0, s.fail("reading the schema version", err)
	}
	if from > schemaVersion {
		return from, from, fmt.Errorf("%s: the backend's schema was upgraded by a newer agentctl (schema version %d, this agentctl knows %d); upgrade agentctl", s.where, from, schemaVersion)
	}
	for i, m := range s.t.migrationSQL() {
		v := i + 1
		if v <= from {
			continue
		}
		if _, err := tx.Exec(ctx, s.t.expand(m)); err != nil {
			return from, from, s.fail(fmt.Sprintf("applying schema migration %d", v), err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.t.migrations+` (version, agentctl_version) VALUES ($1, $2)`, v, s.cfg.Version); err != nil {
			return from, from, s.fail(fmt.Sprintf("recording schema migration %d", v), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return from, from, s.fail("creating the schema", err)
	}
	return from, schemaVersion, nil
}
