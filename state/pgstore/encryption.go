package pgstore

import (
	"context"
	"errors"
	"fmt"

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

// checkEncryption runs before a whole write: it refuses to replace a
// state encrypted with another key (or encrypted while no key is
// configured), which would lose it; and when the latest version was
// written with another setting (before the key was configured, or
// before decrypt was set), it first converts the rows written then (the
// state versions kept and every journal record) to this store's
// setting, so that nothing stays behind unencrypted (or encrypted).
// Each row is converted in place; readers read either form.
func (s *Store) checkEncryption(ctx context.Context) error {
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
		_, err := keys.Key().Open("the state in the "+s.where, kindState, head)
		if errors.Is(err, seal.ErrNoKey) || errors.Is(err, seal.ErrWrongKey) {
			return err
		}
	}
	if keys == nil || seal.Sealed(head) == keys.Encrypting() {
		return nil
	}
	ctx, cancel = context.WithTimeout(ctx, convertTimeout)
	defer cancel()
	if err := s.convertRows(ctx, s.t.versions, "serial", "data", kindState); err != nil {
		return err
	}
	return s.convertRows(ctx, s.t.records, "name, seq", "record", kindJournal)
}

// convertRows re-encodes the column col of the rows of table whose form
// is not the store's setting, one row at a time.
func (s *Store) convertRows(ctx context.Context, table, key, col, kind string) error {
	keys := s.cfg.Encryption
	// The rows to convert: sealed ones when decrypting, the others
	// when encrypting.
	rows, err := s.pool.Query(ctx, `SELECT `+key+` FROM `+table+` WHERE (substring(`+col+` from 1 for 4) = '\x00414353'::bytea) <> $1`, keys.Encrypting())
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
	// The rows are named by their key columns: $2 (and $3) in the
	// update, $1 (and $2) in the select.
	selWhere, updWhere := "serial = $1", "serial = $2"
	if key != "serial" {
		selWhere, updWhere = "name = $1 AND seq = $2", "name = $2 AND seq = $3"
	}
	for _, k := range keysOf {
		var data []byte
		if err := s.pool.QueryRow(ctx, `SELECT `+col+` FROM `+table+` WHERE `+selWhere, k...).Scan(&data); err != nil {
			return s.fail("converting the stored rows to the encryption setting", err)
		}
		plain, err := keys.Open(fmt.Sprintf("%s row %v", table, k), kind, data)
		if err != nil {
			return err
		}
		out, err := keys.Seal(kind, plain)
		if err != nil {
			return err
		}
		if _, err := s.pool.Exec(ctx, `UPDATE `+table+` SET `+col+` = $1 WHERE `+updWhere, append([]any{out}, k...)...); err != nil {
			return s.fail("converting the stored rows to the encryption setting", err)
		}
	}
	return nil
}
