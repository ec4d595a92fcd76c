package archive

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// createSnapshotTemp opens the file a snapshot of base is written to in
// dir: an unnamed O_TMPFILE file, which the kernel frees if the process
// dies before commit links it, or, where the filesystem or /proc does not
// allow that, a named temporary file.
func createSnapshotTemp(dir, base string) (*snapshotTemp, error) {
	// Readable too: the digest of a file appended in the kernel is read
	// back from it (appender).
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		// Linking it needs /proc/self/fd (without CAP_DAC_READ_SEARCH).
		if _, serr := os.Stat(procFD(fd)); serr == nil {
			return &snapshotTemp{f: os.NewFile(uintptr(fd), filepath.Join(dir, "."+base+" (unnamed)")), dir: dir, base: base}, nil
		}
		unix.Close(fd)
	}
	f, err := os.OpenFile(tempName(dir, base), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &snapshotTemp{f: f, name: f.Name(), dir: dir, base: base}, nil
}

func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// linkTemp gives the unnamed file f a temporary name in dir and returns
// it.
func linkTemp(f *os.File, dir, base string) (string, error) {
	for range 8 {
		name := tempName(dir, base)
		err := unix.Linkat(unix.AT_FDCWD, procFD(int(f.Fd())), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("linking the snapshot into %s: %w", dir, err)
		}
	}
	return "", fmt.Errorf("linking the snapshot into %s: %w", dir, unix.EEXIST)
}

// writebackChunk is how much a snapshot writes before it asks the kernel
// to start writing that part to disk.
const writebackChunk = 8 << 20

// writer is where the snapshot's bytes go: the file, with its disk writes
// started chunk by chunk as it grows (sync_file_range(2)), so the disk
// works while the archive is still being made and the fsync of commit
// waits for the last chunk only, not for the whole file. Each chunk
// start also waits for the chunk before it, which keeps the snapshot's
// dirty pages in memory to two chunks. This only schedules writes: the
// fsync of commit is what makes the file durable and what reports a
// write error; where sync_file_range is refused (a file system without
// it) the chunks are left to that fsync.
func (t *snapshotTemp) writer() io.Writer { return t.writeback() }

func (t *snapshotTemp) writeback() *writeback {
	return &writeback{f: t.f, fd: int(t.f.Fd())}
}

type writeback struct {
	f           *os.File
	fd          int
	off, queued int64
	refused     bool // sync_file_range was refused: leave it to fsync
	// pending are the ranges reserved for the archive's worker, in
	// order, not yet known to be filled; filledTo is the end of the last
	// one it filled (it fills them in order).
	pending  []span
	filledTo atomic.Int64
}

type span struct{ start, end int64 }

// Write writes p at the end of the stream (its offset, not the file's
// position: the ranges the worker fills are not written in order).
func (w *writeback) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.grew(int64(n))
	return n, err
}

// reserve adds n bytes at the end of the stream for the worker to fill
// and returns where they start; filled tells the writeback once they are.
func (w *writeback) reserve(n int64) int64 {
	start := w.off
	w.pending = append(w.pending, span{start, start + n})
	w.grew(n)
	return start
}

// filled records that the worker filled the range ending at end (on the
// worker's goroutine).
func (w *writeback) filled(end int64) { w.filledTo.Store(end) }

// written is how far the file is written without a gap: up to the first
// range the worker has not filled yet, or to its end.
func (w *writeback) written() int64 {
	done := w.filledTo.Load()
	for len(w.pending) > 0 && w.pending[0].end <= done {
		w.pending = w.pending[1:]
	}
	if len(w.pending) > 0 {
		return w.pending[0].start
	}
	return w.off
}

// grew accounts for n bytes added at the end of the stream, starting the
// disk writes of the chunks written so far (not those with a range the
// worker has yet to fill: their writes would start before their data).
func (w *writeback) grew(n int64) {
	w.off += n
	end := w.written()
	for !w.refused && end-w.queued >= writebackChunk {
		if serr := unix.SyncFileRange(w.fd, w.queued, writebackChunk, unix.SYNC_FILE_RANGE_WRITE); serr != nil {
			w.refused = true
			break
		}
		if w.queued >= writebackChunk {
			const wait = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
			if serr := unix.SyncFileRange(w.fd, w.queued-writebackChunk, writebackChunk, wait); serr != nil {
				w.refused = true
				break
			}
		}
		w.queued += writebackChunk
	}
}

// appender is a plain snapshot's destination on Linux: the archive's
// bytes go through the digest's Tee to the file, and a file's content
// into a range of it that the archive's worker fills in the kernel
// (copy_file_range, hostfs.FileAppender) while the archive goes on; the
// digest reads each range back from the snapshot once it is filled, so
// the snapshot's digest is of the file's bytes either way.
type appender struct {
	tee *hashpipe.Tee
	h   *hashpipe.Writer
	wb  *writeback
}

// teeWriter is the snapshot's destination for a plain snapshot: the
// digest's Tee in front of the file, which appends files in the kernel.
func (t *snapshotTemp) teeWriter(h *hashpipe.Writer) (io.Writer, func() error) {
	wb := t.writeback()
	tee := h.Tee(wb)
	return &appender{tee: tee, h: h, wb: wb}, tee.Flush
}

func (a *appender) Write(p []byte) (int, error) { return a.tee.Write(p) }

func (a *appender) AppendRange(size int64) (hostfs.FileRange, bool, error) {
	// What is buffered (the file's header) goes first, and is hashed
	// first.
	if err := a.tee.Flush(); err != nil {
		return hostfs.FileRange{}, false, err
	}
	start := a.wb.reserve(size)
	back := &copiedFile{f: fileRange{f: a.wb.f, off: start}, copied: make(chan struct{})}
	a.h.WriteFile(back, size, nil)
	done := func(err error) {
		if err == nil {
			a.wb.filled(start + size)
		}
		back.done(err)
	}
	return hostfs.FileRange{Fd: a.wb.fd, Off: start, Done: done}, true, nil
}

// fileRange is the part of f from off on, for the digest to read; it
// stays open when the digest is done with it.
type fileRange struct {
	f   *os.File
	off int64
}

func (r fileRange) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, r.off+off) }
func (r fileRange) Close() error                            { return nil }
func (r fileRange) Name() string                            { return r.f.Name() }
