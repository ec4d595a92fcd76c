package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentctl/agentctl/internal/seal"
)

// Kinds of the sealed payloads (their envelopes' additional data).
const (
	kindState   = "pg-state"
	kindChange  = "pg-change"
	kindJournal = "pg-journal"
)

// convertTimeout bounds the conversion of the rows written before the
// encryption setting changed.
const convertTimeout = 30 * opTimeout

// checkEncryption runs before a whole write of the state of lineage:
// it refuses to replace a state encrypted with another key (or
// encrypted while no key is configured), which would lose it; and when
// the latest version was written with another setting (before the key
// was configured, before decrypt was set, or encrypted by an agentctl
// that did not bind rows to their places), it first converts the rows
// written then (the state versions kept and every journal record) to
// this store's setting, so that nothing stays behind unencrypted (or
// encrypted, or unbound). Each row is converted in place; readers read
// either form.
func (s *Store) checkEncryption(ctx context.Context, lineage string) error {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	var head []byte
	err := s.pool.QueryRow(cctx, `SELECT substring(data from 1 for 64) FROM `+s.t.versions+` ORDER BY serial DESC LIMIT 1`).Scan(&head)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return s.fail("writing the state", err)
	}
	keys := s.cfg.Encryption
	if seal.Sealed(head) {
		// Open a truncated envelope only for its key check: a refusal
		// names the key; ErrDamaged (the truncation) means the key is
		// right.
		_, err := keys.Key().Open("the state in the "+s.where, kindState, seal.Place{}, head)
		if errors.Is(err, seal.ErrNoKey) || errors.Is(err, seal.ErrWrongKey) {
			return err
		}
	}
	if keys == nil || seal.Bound(head) == keys.Encrypting() && seal.Sealed(head) == keys.Encrypting() {
		return nil
	}
	ctx, cancel = context.WithTimeout(ctx, convertTimeout)
	defer cancel()
	if err := s.convertRows(ctx, s.t.versions, "serial, lineage", "data", kindState, func(k []any) seal.Place {
		return versionPlace(k[1].(string), k[0].(int64))
	}); err != nil {
		return err
	}
	return s.convertRows(ctx, s.t.records, "name, seq", "record", kindJournal, func(k []any) seal.Place {
		return recordPlace(lineage, k[0].(string), k[1].(int64))
	})
}

// convertRows re-encodes the column col of the rows of table whose form
// is not the store's setting, one row at a time; a row's key columns
// are key (two of them), and at gives its place from their values.
func (s *Store) convertRows(ctx context.Context, table, key, col, kind string, at func(k []any) seal.Place) error {
	keys := s.cfg.Encryption
	// The rows to convert: sealed ones when decrypting, the others
	// (plaintext, or sealed without places) when encrypting.
	where := `substring(` + col + ` from 1 for 4) = '\x00414353'::bytea`
	if keys.Encrypting() {
		where = `substring(` + col + ` from 1 for 5) IS DISTINCT FROM '\x0041435302'::bytea`
	}
	rows, err := s.pool.Query(ctx, `SELECT `+key+` FROM `+table+` WHERE `+where)
	if err != nil {
		return s.fail("converting the stored rows to the encryption setting", err)
	}
	var keysOf [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			rows.Close()
			return s.fail("converting the stored rows to the encryption setting", err)
		}
		keysOf = append(keysOf, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.fail("converting the stored rows to the encryption setting", err)
	}
	// The rows are named by their key columns: $2 and $3 in the
	// update, $1 and $2 in the select.
	k0, k1, _ := strings.Cut(key, ", ")
	selWhere := k0 + ` = $1 AND ` + k1 + ` = $2`
	updWhere := k0 + ` = $2 AND ` + k1 + ` = $3`
	for _, k := range keysOf {
		var data []byte
		if err := s.pool.QueryRow(ctx, `SELECT `+col+` FROM `+table+` WHERE `+selWhere, k...).Scan(&data); err != nil {
			return s.fail("converting the stored rows to the encryption setting", err)
		}
		plain, err := keys.Open(fmt.Sprintf("%s row %v", table, k), kind, at(k), data)
		if err != nil {
			return err
		}
		out, err := keys.Seal(kind, at(k), plain)
		if err != nil {
			return err
		}
		if _, err := s.pool.Exec(ctx, `UPDATE `+table+` SET `+col+` = $1 WHERE `+updWhere, append([]any{out}, k...)...); err != nil {
			return s.fail("converting the stored rows to the encryption setting", err)
		}
	}
	return nil
}

// PendingConversion implements state.EncodingReporter: what the next
// whole write does to the latest state version (checkEncryption).
func (s *Store) PendingConversion(ctx context.Context) (string, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	var head []byte
	err := s.pool.QueryRow(cctx, `SELECT substring(data from 1 for 64) FROM `+s.t.versions+` ORDER BY serial DESC LIMIT 1`).Scan(&head)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", s.fail("reading the state", err)
	}
	keys := s.cfg.Encryption
	switch {
	case keys == nil || seal.Sealed(head) == keys.Encrypting() && seal.Bound(head) == keys.Encrypting():
		return "", nil
	case !keys.Encrypting():
		return "decrypts", nil
	case !seal.Sealed(head):
		return "encrypts", nil
	}
	return "binds each record to its place", nil
}
