package archive

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/sandbox"
)

// ErrSnapshotMissing is returned (wrapped) when a snapshot file to restore
// from does not exist.
var ErrSnapshotMissing = errors.New("snapshot file is missing")

// ErrSnapshotCorrupt is returned (wrapped) when a snapshot file is not a
// regular file or its content does not match the digest recorded when it
// was written.
var ErrSnapshotCorrupt = errors.New("snapshot file is corrupt")

// CheckSnapshotFile reports whether src can be restored from: it must
// exist and be a regular file. It does not read the file.
func CheckSnapshotFile(src string) error {
	fi, err := os.Stat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", src, ErrSnapshotMissing)
	}
	if err != nil {
		return fmt.Errorf("snapshot file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s, not a regular file: %w", src, fi.Mode().Type(), ErrSnapshotCorrupt)
	}
	return nil
}

// RestoreSnapshot extracts the snapshot file src into the workspace root
// of sb through CopyIn, so the provider's safe extraction applies, and
// checks as it reads that the file's digest is want (SnapshotInfo.Digest:
// "blake3:<hex>" or a bare hex SHA-256; "" skips the check). It returns
// nil only when every member was extracted and the digest matched. On an
// error the workspace holds an unknown part of the snapshot (CopyIn
// stops at the first refused member): the caller must not treat it as
// restored. Errors wrap ErrSnapshotMissing or ErrSnapshotCorrupt when
// those are the cause; they do not repeat src unless the file is
// missing.
func RestoreSnapshot(ctx context.Context, sb sandbox.Sandbox, src, want string) error {
	return RestoreSnapshotWith(ctx, sb, src, want, nil)
}

// RestoreSnapshotWith is RestoreSnapshot for a snapshot that may be
// encrypted (SnapshotOptions.Key): it is decrypted with key as it is
// read, and want is the digest of the tar. An encrypted snapshot
// without key, or with another key, is refused (seal.ErrNoKey,
// seal.ErrWrongKey); an unencrypted one is read as it is whatever key.
func RestoreSnapshotWith(ctx context.Context, sb sandbox.Sandbox, src, want string, key *seal.Key) error {
	alg, wantHex := digest.BLAKE3, ""
	if want != "" {
		var err error
		if alg, wantHex, err = digest.Parse(want); err != nil {
			return fmt.Errorf("the snapshot's recorded %w", err)
		}
	}
	if err := CheckSnapshotFile(src); err != nil {
		return err
	}
	file, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", src, ErrSnapshotMissing)
	}
	if err != nil {
		return err
	}
	defer file.Close()
	f, err := openSnapshot(file, key)
	if err != nil {
		if errors.Is(err, seal.ErrDamaged) {
			return fmt.Errorf("%w: %w", err, ErrSnapshotCorrupt)
		}
		return err
	}
	// Hashed on another goroutine, overlapping the extraction; the bytes
	// hashed are the bytes extracted (one read of the file). Read through
	// the hash's buffers (the archive's headers are 512-byte reads, one
	// system call each without a buffer), which are hashed as they are
	// once extracted.
	h := hashpipe.New(alg.New())
	defer h.Close()
	r := h.TeeReader(f)
	if err := sb.CopyIn(ctx, "", r); err != nil {
		if want != "" && ctx.Err() == nil {
			// A damaged file usually shows as a bad archive: say so when
			// the bytes read so far already differ from what was written.
			if _, rerr := io.Copy(io.Discard, r); rerr == nil && hex.EncodeToString(h.Sum()) != wantHex {
				return fmt.Errorf("%w (the file does not match the digest %s recorded when it was written: %w)", err, digest.Named(want), ErrSnapshotCorrupt)
			}
		}
		return err
	}
	// Every CopyIn has consumed the archive when it returns; the rest of
	// the file (tar padding, and what the buffer holds of it) still
	// counts towards the digest.
	if _, err := io.Copy(io.Discard, r); err != nil {
		if errors.Is(err, seal.ErrDamaged) {
			return fmt.Errorf("reading the snapshot: %w: %w", err, ErrSnapshotCorrupt)
		}
		return fmt.Errorf("reading the snapshot: %w", err)
	}
	if want == "" {
		return nil
	}
	if got := h.Sum(); hex.EncodeToString(got) != wantHex {
		return fmt.Errorf("the file's digest is %s, not the %s recorded when it was written: %w", alg.Format(got), digest.Named(want), ErrSnapshotCorrupt)
	}
	return nil
}

// snapshotReader is a snapshot's tar: the file, or its decrypted content.
type snapshotReader interface {
	io.Reader
	io.Seeker
	io.ReaderAt
}

// openSnapshot returns the tar of the snapshot file f: f itself, or,
// when it is encrypted, its content decrypted with key as it is read.
func openSnapshot(f *os.File, key *seal.Key) (snapshotReader, error) {
	prefix := make([]byte, seal.StreamMagicLen)
	n, err := f.ReadAt(prefix, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the snapshot: %w", err)
	}
	if !seal.IsStream(prefix[:n]) {
		return f, nil
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the snapshot: %w", err)
	}
	sr, err := key.OpenStream(f, fi.Size(), "snapshot "+f.Name())
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(sr, 0, sr.Size()), nil
}
