package archive

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
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
	// hashed are the bytes extracted (restoreSource).
	h := hashpipe.New(alg.New())
	defer h.Close()
	r, err := restoreSource(f, h)
	if err != nil {
		return err
	}
	if err := sb.CopyIn(ctx, "", r); err != nil {
		if want != "" && ctx.Err() == nil {
			// A damaged file usually shows as a bad archive: say so when
			// the bytes read so far already differ from what was written.
			if _, rerr := io.Copy(io.Discard, r); rerr == nil && hex.EncodeToString(h.Sum()) != wantHex && h.Err() == nil {
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
	got := h.Sum()
	if err := h.Err(); err != nil {
		return fmt.Errorf("reading back what was restored: %w", err)
	}
	if want == "" {
		return nil
	}
	if hex.EncodeToString(got) != wantHex {
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

// restoreSource is what the extraction of the snapshot f reads, its
// bytes hashed by h on h's goroutine: on Linux, for a plain snapshot
// file, a copySource, whose members' content goes to their files in the
// kernel; otherwise f read through h's buffers (the archive's headers are
// 512-byte reads, one system call each without a buffer), which are
// hashed as they are once extracted.
func restoreSource(f snapshotReader, h *hashpipe.Writer) (io.Reader, error) {
	file, ok := f.(*os.File)
	if !ok || runtime.GOOS != "linux" {
		return h.TeeReader(f), nil
	}
	fi, err := file.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the snapshot: %w", err)
	}
	return &copySource{f: file, h: h, size: fi.Size(), blocks: make([]byte, 2*tarBlock)}, nil
}

// tarBlock is the tar format's block: headers are one block each, and a
// member's content is padded to a whole number of them.
const tarBlock = 512

// copySource is a plain snapshot file as the extraction reads it
// (hostfs.ContentSource): the archive's headers are read as the tar
// reader asks for them, with no read-ahead into a member's content, and
// hashed; a regular member's content goes from the snapshot to its file
// in the kernel (copy_file_range, on the extractor's worker goroutine,
// through a buffer where the kernel will not copy between the two file
// systems), and the digest reads it back from that file once it is
// there, so the digest is of the bytes extracted, as the snapshot's is
// of the bytes in the snapshot.
type copySource struct {
	f    *os.File
	h    *hashpipe.Writer
	size int64 // f's
	off  int64 // in f, of the stream's next byte
	// next, after a member's content, is what the tar reader reads next in
	// one read: the content's padding and the next header.
	next int
	// ahead is what was read of next (into blocks) and not served yet.
	ahead, blocks []byte
}

// Read serves the snapshot's bytes and hands them to the digest.
func (s *copySource) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(s.ahead) == 0 && s.next > len(p) {
		n, err := s.readAt(s.blocks[:s.next])
		s.ahead, s.next = s.blocks[:n], 0
		if n == 0 {
			return 0, err
		}
	}
	if len(s.ahead) > 0 {
		k := copy(p, s.ahead)
		s.ahead = s.ahead[k:]
		return k, nil
	}
	s.next = 0
	n, err := s.readAt(p)
	if n > 0 {
		return n, nil
	}
	return 0, err
}

// readAt reads p's length from the stream's next byte on (less only at
// its end, io.EOF, or with an error) and hands it to the digest.
func (s *copySource) readAt(p []byte) (int, error) {
	n, err := s.f.ReadAt(p, s.off)
	s.off += int64(n)
	s.h.Write(p[:n])
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}

// ContentRange gives the extractor the next n bytes of the snapshot, a
// member's content, to copy into the member's file fd, and hands the
// digest a duplicate of fd to read the content back from once the copy
// is done.
func (s *copySource) ContentRange(fd int, name string, n int64) (hostfs.FileRange, bool, error) {
	if len(s.ahead) > 0 {
		// Read ahead is a header's bytes, never content; should it hold
		// some, the extractor reads the content from the stream instead.
		return hostfs.FileRange{}, false, nil
	}
	if s.off+n > s.size {
		return hostfs.FileRange{}, false, fmt.Errorf("archive truncated: %d of %d bytes: %w", s.size-s.off, n, io.ErrUnexpectedEOF)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return hostfs.FileRange{}, false, fmt.Errorf("reading back %s for the snapshot's digest: %w", name, err)
	}
	back := &copiedFile{f: os.NewFile(uintptr(dup), name), copied: make(chan struct{})}
	s.h.WriteFile(back, n, nil)
	rg := hostfs.FileRange{Fd: int(s.f.Fd()), Off: s.off, Done: back.done}
	s.off += n
	s.next = int(-n&(tarBlock-1)) + tarBlock
	return rg, true, nil
}

// copiedFile is a file (a restored file, a range of a snapshot) the
// digest reads back once the archive's or the extractor's worker has
// copied content into it: its reads wait until the copy is done, and
// fail with the copy's error.
type copiedFile struct {
	f      hashpipe.File
	copied chan struct{}
	err    error
	once   sync.Once
}

// done records the copy's outcome; only the first call counts.
func (c *copiedFile) done(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.copied)
	})
}

func (c *copiedFile) ReadAt(p []byte, off int64) (int, error) {
	<-c.copied
	if c.err != nil {
		return 0, c.err
	}
	return c.f.ReadAt(p, off)
}

func (c *copiedFile) Close() error { return c.f.Close() }
func (c *copiedFile) Name() string { return c.f.Name() }
