package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentctl/agentctl/sandbox/archive"
)

// chunkSize is the size of a snapshot chunk row.
const chunkSize = 1 << 20

// snapshotTimeout bounds the transfer of one snapshot (up to 16 GiB).
const snapshotTimeout = 2 * time.Hour

// PutSnapshot stores the snapshot written at Abs(name): its chunks are
// streamed from the file in one transaction with its row (size and
// SHA-256), which replaces a snapshot of the same name. Memory use is
// one chunk, whatever the snapshot's size.
func (s *Store) PutSnapshot(ctx context.Context, name string) error {
	src := s.Abs(name)
	if err := archive.CheckSnapshotFile(src); err != nil {
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("storing snapshot %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("storing snapshot %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.fail("storing snapshot "+name, err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `DELETE FROM `+s.t.snapshots+` WHERE name = $1`, name); err != nil {
		return s.fail("storing snapshot "+name, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.t.snapshots+` (name, size, sha256) VALUES ($1, $2, '')`, name, fi.Size()); err != nil {
		return s.fail("storing snapshot "+name, err)
	}
	h := sha256.New()
	buf := make([]byte, chunkSize)
	var seq int32
	var total int64
	var readErr error
	src2 := pgx.CopyFromFunc(func() ([]any, error) {
		n, err := io.ReadFull(f, buf)
		if n == 0 {
			if err == io.EOF {
				return nil, nil
			}
			readErr = err
			return nil, err
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			readErr = err
			return nil, err
		}
		h.Write(buf[:n])
		total += int64(n)
		seq++
		return []any{name, seq, buf[:n]}, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.cfg.Schema, "snapshot_chunks"}, []string{"name", "seq", "data"}, src2); err != nil {
		if readErr != nil {
			return fmt.Errorf("storing snapshot %s: reading %s: %w", name, src, readErr)
		}
		return s.fail("storing snapshot "+name, err)
	}
	if total != fi.Size() {
		return fmt.Errorf("storing snapshot %s: %s changed while it was stored (%d bytes read, %d expected)", name, src, total, fi.Size())
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.t.snapshots+` SET sha256 = $2 WHERE name = $1`, name, hex.EncodeToString(h.Sum(nil))); err != nil {
		return s.fail("storing snapshot "+name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.fail("storing snapshot "+name, err)
	}
	return nil
}

// snapshotRow returns the stored size and SHA-256 of the snapshot name,
// or an error wrapping archive.ErrSnapshotMissing.
func (s *Store) snapshotRow(ctx context.Context, name string) (size int64, sum string, err error) {
	err = retry(func() error {
		size, sum, err = s.snapshotRowOnce(ctx, name)
		return err
	})
	return size, sum, err
}

func (s *Store) snapshotRowOnce(ctx context.Context, name string) (size int64, sum string, err error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	err = s.pool.QueryRow(ctx, `SELECT size, sha256 FROM `+s.t.snapshots+` WHERE name = $1`, name).Scan(&size, &sum)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", fmt.Errorf("%s: snapshot %s is not in the backend: %w", s.where, name, archive.ErrSnapshotMissing)
	}
	if err != nil {
		return 0, "", s.fail("reading snapshot "+name, err)
	}
	return size, sum, nil
}

// CheckSnapshot reports whether the snapshot name is stored.
func (s *Store) CheckSnapshot(ctx context.Context, name string) error {
	_, _, err := s.snapshotRow(ctx, name)
	return err
}

// FetchSnapshot makes the snapshot name available at Abs(name): a local
// file of the stored size is used as it is (the restore checks its
// digest), otherwise the chunks are streamed to a temporary file that is
// checked (size and SHA-256), synced and renamed into place.
func (s *Store) FetchSnapshot(ctx context.Context, name string) error {
	size, sum, err := s.snapshotRow(ctx, name)
	if err != nil {
		return err
	}
	dst := s.Abs(name)
	if fi, err := os.Stat(dst); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("fetching snapshot %s: %w", name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("fetching snapshot %s: %w", name, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return s.fail("fetching snapshot "+name, err)
	}
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(ctx, `SELECT data FROM `+s.t.chunks+` WHERE name = $1 ORDER BY seq`, name)
	if err != nil {
		return s.fail("fetching snapshot "+name, err)
	}
	h := sha256.New()
	w := io.MultiWriter(tmp, h)
	var total int64
	for rows.Next() {
		// RawValues avoids a copy: the bytes are written before the
		// next row is read.
		data := rows.RawValues()[0]
		if _, err := w.Write(data); err != nil {
			rows.Close()
			return fmt.Errorf("fetching snapshot %s: writing %s: %w", name, tmp.Name(), err)
		}
		total += int64(len(data))
	}
	if err := rows.Err(); err != nil {
		return s.fail("fetching snapshot "+name, err)
	}
	if total != size || hex.EncodeToString(h.Sum(nil)) != sum {
		return fmt.Errorf("%s: snapshot %s: the stored chunks (%d bytes) do not match the size (%d) and SHA-256 recorded when it was stored: %w", s.where, name, total, size, archive.ErrSnapshotCorrupt)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fetching snapshot %s: fsync: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("fetching snapshot %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("fetching snapshot %s: %w", name, err)
	}
	ok = true
	return nil
}

// RemoveSnapshots removes the stored snapshots of the sandbox whose
// file-safe address is base but keep ("" for none), and name when it is
// not "", with their local copies.
func (s *Store) RemoveSnapshots(ctx context.Context, base, keep, name string) error {
	keepName := ""
	if keep != "" {
		keepName = path.Join("snapshots", keep)
	}
	prefix := path.Join("snapshots", base)
	cctx, cancel := opCtx(ctx)
	defer cancel()
	_, err := s.pool.Exec(cctx, `DELETE FROM `+s.t.snapshots+`
		WHERE name <> $2 AND (name = $3 OR name = $1 || '.tar' OR (starts_with(name, $1 || '@') AND right(name, 4) = '.tar'))`,
		prefix, keepName, name)
	if err != nil {
		return s.fail("removing snapshots of "+base, err)
	}
	return s.cfg.Local.RemoveSnapshots(ctx, base, keep, name)
}
