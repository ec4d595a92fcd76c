//go:build unix

package hostfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/sandbox"
)

// ArchiveOptions tune Archive.
type ArchiveOptions struct {
	// Exclude is asked for every entry (path relative to the archived
	// directory, slash-separated); true leaves it out, and for a directory
	// its whole subtree.
	Exclude func(rel string, isDir bool) bool
	// Strict makes symlinks and special files (FIFOs, sockets, devices)
	// errors. Otherwise symlinks are archived as symlinks and special
	// files are skipped.
	Strict bool
	// Digest, when set, receives a canonical encoding of the tree as it is
	// archived: for every entry in walk order its type and name, and for
	// files the sanitized mode (0644 or 0755), the size and the content. Hash it for a content
	// digest that ignores timestamps and owners.
	Digest io.Writer
	// Sparse archives files with holes (found with SEEK_DATA/SEEK_HOLE)
	// in the PAX sparse format 1.0, holding only their data; Extract
	// writes the holes back as holes. Without it (and always with
	// Digest) holes are archived as zeros. Extractors other than Extract
	// (SanitizeTar's consumers) refuse sparse members, so only archives
	// that Extract reads may set it.
	Sparse bool
	// SanitizeModes writes the modes extraction would give without
	// keeping permissions: files 0644, or 0755 with any execute bit, and
	// directories 0755. Manifest trees are archived so, since their
	// digest covers only the execute bit: every provider then writes the
	// same tree for the same digest, as CopyTree writes it.
	SanitizeModes bool
	// Reserve, when set, is called before each member is written with
	// its name, the bytes of content it will add to the archive and, for
	// a sparse file, its logical size (0 otherwise); an error stops the
	// archive.
	Reserve func(name string, stored, sparseSize int64) error
	// Observe, when set, is called for every entry archived, the
	// archived directory first (as "."), in walk order, with its status
	// (sandbox.HostTree.Observe): a file's before its content was read
	// when it is hashed (Digest), else after; a directory's before its
	// entries were listed.
	Observe func(rel string, st sandbox.EntryStat)
}

// FileAppender is an Archive destination (the io.Writer given to Archive)
// that is a file the archive's bytes go to in order (a snapshot): a
// regular file's content is then copied into it in the kernel
// (copy_file_range), by a worker goroutine while the walk goes on,
// instead of being written. AppendRange reserves the next size bytes of
// the stream, as if they had been written, and returns where they are in
// the file (whose Done is told once the content is there, or why it is
// not); ok false means it reserved nothing and the content is written as
// usual. Archive returns once every range is filled (or it failed).
type FileAppender interface {
	AppendRange(size int64) (rg FileRange, ok bool, err error)
}

// ErrSpecialFile is returned (wrapped) by a strict Archive for a symlink
// or special file.
var ErrSpecialFile = errors.New("not a regular file or directory")

// MaxArchivePath is the longest member name, in bytes, that Archive
// writes and Extract accepts (PATH_MAX): a deeper tree cannot be
// archived, and Archive says which path is too long.
const MaxArchivePath = 4096

// ErrPathTooLong is returned (wrapped) by Archive for an entry whose path
// is longer than MaxArchivePath.
var ErrPathTooLong = errors.New("path too long")

// Archive writes a tar stream of directory dir of d to w: directories,
// regular files and symlinks, sorted by name, depth first, member names
// relative to dir, no owners, modification times to the second. The walk
// never follows symlinks and keeps at most a few dozen directories open
// however deep the tree is; an entry whose path is longer than
// MaxArchivePath fails it with ErrPathTooLong. A file that changes size
// while it is read is an error.
func Archive(ctx context.Context, d *Dir, dir string, w io.Writer, opts ArchiveOptions) error {
	r, err := rel(dir)
	if err != nil {
		return err
	}
	f, err := d.openDir(r)
	if err != nil {
		return pathErr("archive", dir, err)
	}
	defer f.Close()
	chain, err := newDirChain(int(f.Fd()))
	if err != nil {
		return pathErr("archive", dir, err)
	}
	defer chain.close()
	sw := &captureWriter{w: w}
	a := archiver{ctx: ctx, sw: sw, tw: tar.NewWriter(sw), opts: opts, buf: make([]byte, 256<<10), top: r, chain: chain}
	if opts.Digest != nil {
		a.opts.Sparse = false
	}
	err = a.run()
	// The files appended are in place (or the archive failed) once the
	// worker is done.
	if werr := a.appends.finish(err != nil); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	return a.tw.Close()
}

type archiver struct {
	ctx   context.Context
	sw    *captureWriter
	tw    *tar.Writer
	opts  ArchiveOptions
	buf   []byte
	top   string
	chain *dirChain
	// cp, when set, receives the tree instead of the tar writer
	// (CopyTree): the walk, the excludes, the refusals and the digest
	// are the archive's.
	cp *treeCopier
	// appends copies files' content into a FileAppender's ranges.
	appends kernelCopier
}

// op names what the walk does in messages about the tree it reads.
func (a *archiver) op() string {
	if a.cp != nil {
		return "read"
	}
	return "archive"
}

func (a *archiver) digest(parts ...string) {
	if a.opts.Digest == nil {
		return
	}
	for _, p := range parts {
		a.opts.Digest.Write([]byte(p))
		a.opts.Digest.Write([]byte{0})
	}
}

func (a *archiver) reserve(name string, stored, sparseSize int64) error {
	if a.opts.Reserve == nil {
		return nil
	}
	return a.opts.Reserve(name, stored, sparseSize)
}

// tooLong is the error for an entry whose path exceeds MaxArchivePath.
func (a *archiver) tooLong(name string) error {
	return fmt.Errorf("archive %s…: the path is %d bytes long, %d directories deep; archives keep paths up to %d bytes: move or remove the deeply nested directories: %w",
		name[:64], len(name), strings.Count(name, "/"), MaxArchivePath, ErrPathTooLong)
}

// run walks the tree from the top of the chain.
func (a *archiver) run() error {
	if a.opts.Observe != nil {
		a.opts.Observe(".", EntryStat(&a.chain.levels[0].st))
	}
	return a.walk("")
}

// observed reports file name's status to Observe: st, taken before its
// content was read, when the content is hashed (what was copied was
// hashed, or is checked against st before the digest is done: a file
// found later with status st still has the content hashed); otherwise,
// the copy not being hashed, a new fstat of fd, so that a file changed
// while it was copied does not show the status it had before.
func (a *archiver) observed(fd int, name string, st *unix.Stat_t) error {
	if a.opts.Observe == nil {
		return nil
	}
	if a.opts.Digest != nil {
		a.opts.Observe(name, EntryStat(st))
		return nil
	}
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		return pathErr(a.op(), relJoin(a.top, name), err)
	}
	a.opts.Observe(name, EntryStat(&now))
	return nil
}

// EntryStat is st as a sandbox.EntryStat.
func EntryStat(st *unix.Stat_t) sandbox.EntryStat {
	return sandbox.EntryStat{
		Mode: uint32(st.Mode), Size: int64(st.Size),
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(),
		Ino: uint64(st.Ino), Dev: uint64(st.Dev),
	}
}

// sameContent reports whether a file whose status was a and is now b
// still has the content it had: same inode, size, modification and
// change times (any write or metadata change moves the change time).
func sameContent(a, b *unix.Stat_t) bool {
	return a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// walk archives the entries of the chain's current directory, whose path
// relative to the archived directory is prefix ("" for the top).
func (a *archiver) walk(prefix string) error {
	dirfd, err := a.chain.fd()
	if err != nil {
		return pathErr(a.op(), relJoin(a.top, prefix), err)
	}
	ents, err := readDirEntries(dirfd)
	if err != nil {
		return pathErr(a.op(), relJoin(a.top, prefix), err)
	}
	slices.SortFunc(ents, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	for _, de := range ents {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		n := de.Name()
		name := n
		if prefix != "" {
			name = prefix + "/" + n
		}
		if len(name) > MaxArchivePath {
			return a.tooLong(name)
		}
		// A subdirectory walked before may have closed this one.
		if dirfd, err = a.chain.fd(); err != nil {
			return pathErr(a.op(), relJoin(a.top, prefix), err)
		}
		if de.Type().IsRegular() {
			// The directory says it is a regular file: the fstat of its
			// open descriptor is its only stat (one system call less per
			// file). A file gone since is skipped; one that is no longer
			// a regular file is looked at again below.
			if a.opts.Exclude != nil && a.opts.Exclude(name, false) {
				continue
			}
			err := a.file(dirfd, n, name, true)
			if err == nil || errors.Is(err, errGone) {
				continue
			}
			if !errors.Is(err, errRetyped) {
				return err
			}
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue
			}
			return pathErr(a.op(), relJoin(a.top, name), err)
		}
		mode := sandbox.FileModeOf(uint32(st.Mode))
		isDir := mode.IsDir()
		if a.opts.Exclude != nil && a.opts.Exclude(name, isDir) {
			continue
		}
		mtime := time.Unix(int64(st.Mtim.Sec), 0)
		switch {
		case isDir:
			if err := a.reserve(name, 0, 0); err != nil {
				return err
			}
			if a.cp != nil {
				err = a.cp.enter(n, name)
			} else {
				err = a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: a.mode(mode, true), ModTime: mtime})
			}
			if err != nil {
				return err
			}
			a.digest("d", name)
			if err := a.chain.push(n); err != nil {
				return pathErr(a.op(), relJoin(a.top, name), err)
			}
			if a.opts.Observe != nil {
				// Its status before its entries are read.
				a.opts.Observe(name, EntryStat(&a.chain.levels[len(a.chain.levels)-1].st))
			}
			err = a.walk(name)
			a.chain.pop()
			if a.cp != nil {
				a.cp.leave()
			}
			if err != nil {
				return err
			}
		case mode.IsRegular():
			if err := a.file(dirfd, n, name, false); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			if a.opts.Strict {
				return fmt.Errorf("%s is a symlink: %w", relJoin(a.top, name), ErrSpecialFile)
			}
			target, err := readlinkAt(dirfd, n)
			if err != nil {
				return pathErr(a.op(), relJoin(a.top, name), err)
			}
			if err := a.reserve(name, 0, 0); err != nil {
				return err
			}
			if a.cp != nil {
				err = a.cp.symlink(n, name, target)
			} else {
				err = a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: mtime})
			}
			if err != nil {
				return err
			}
			a.digest("l", name, target)
			if a.opts.Observe != nil {
				a.opts.Observe(name, EntryStat(&st))
			}
		default:
			if a.opts.Strict {
				return fmt.Errorf("%s is a %s: %w", relJoin(a.top, name), mode.Type(), ErrSpecialFile)
			}
		}
	}
	return nil
}

// errGone and errRetyped are file's answers, when unstatted is set, for
// a file that no longer exists and one that is no longer a regular file.
var (
	errGone    = errors.New("gone")
	errRetyped = errors.New("no longer a regular file")
)

// file archives regular file n of dirfd, named name in the archive; its
// mode and modification time are those of its open descriptor. With
// unstatted (the walk knows its type only from the directory), a file
// gone since is errGone and one that is no longer a regular file
// errRetyped, for the walk to decide.
func (a *archiver) file(dirfd int, n, name string, unstatted bool) error {
	fd, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if unstatted && err == unix.ENOENT {
		return errGone
	}
	if unstatted && err == unix.ELOOP {
		return errRetyped // a symlink now
	}
	if err != nil {
		return pathErr(a.op(), relJoin(a.top, name), err)
	}
	// The descriptor becomes an *os.File only for a sparse file's data
	// segments; the archive and the tree copy read it with plain system
	// calls (fdFile).
	src := fdFile{fd, name}
	var closer io.Closer = src // the descriptor's *os.File once it has one
	defer func() {
		if closer != nil {
			closer.Close()
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr(a.op(), relJoin(a.top, name), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		if unstatted {
			return errRetyped
		}
		return fmt.Errorf("%s changed type while archiving: %w", relJoin(a.top, name), ErrSpecialFile)
	}
	mode, mtime := sandbox.FileModeOf(uint32(st.Mode)), time.Unix(int64(st.Mtim.Sec), 0)
	if a.opts.Sparse && st.Size > 0 && st.Blocks*512 < st.Size {
		segs, err := dataSegments(fd, st.Size)
		if err != nil {
			return pathErr(a.op(), relJoin(a.top, name), err)
		}
		if segs != nil {
			f := os.NewFile(uintptr(fd), name)
			closer = f
			if err := a.sparseFile(f, name, mode, mtime, st.Size, segs); err != nil {
				return err
			}
			return a.observed(fd, name, &st)
		}
	}
	if err := a.reserve(name, st.Size, 0); err != nil {
		return err
	}
	if a.cp != nil {
		var digest io.Writer
		if a.opts.Digest != nil {
			a.digest("f", name, strconv.FormatUint(uint64(SanitizeMode(int64(mode.Perm()))), 8), strconv.FormatInt(st.Size, 10))
			digest = a.opts.Digest
		}
		taken, err := a.cp.file(src, &st, n, name, mode, mtime, digest, a.buf)
		if taken {
			// The tree copy's worker closes it; observed does not read
			// it, the copy being hashed.
			closer = nil
		}
		if err != nil {
			return err
		}
		return a.observed(fd, name, &st)
	}
	if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: a.mode(mode, false), Size: st.Size, ModTime: mtime}); err != nil {
		return err
	}
	if fa, ok := a.sw.w.(FileAppender); ok && a.opts.Digest == nil && a.opts.Observe == nil && st.Size > 0 {
		// The header is out (WriteHeader writes it at once): the content
		// goes in after it, copied by the worker, and the tar writer,
		// which must see it to count it, is given as many bytes to drop.
		rg, ok, err := fa.AppendRange(st.Size)
		if err != nil {
			return pathErr(a.op(), relJoin(a.top, name), err)
		}
		if ok {
			// The worker reads the file and closes it, and tells the
			// range's Done (sent first, so that Done is told whatever
			// fails next).
			closer = nil
			if err := a.appends.send(copyJob{name: relJoin(a.top, name), dst: fdFile{rg.Fd, name}, src: src, at: rg.Off, size: st.Size, done: rg.Done}); err != nil {
				return err
			}
			a.sw.discard = st.Size
			for left := st.Size; left > 0; {
				k := min(left, int64(len(a.buf)))
				if _, err := a.tw.Write(a.buf[:k]); err != nil {
					return err
				}
				left -= k
			}
			return nil
		}
	}
	var dst io.Writer = a.tw
	if a.opts.Digest != nil {
		a.digest("f", name, strconv.FormatUint(uint64(SanitizeMode(int64(mode.Perm()))), 8), strconv.FormatInt(st.Size, 10))
		dst = io.MultiWriter(a.tw, a.opts.Digest)
	}
	k, err := io.CopyBuffer(onlyWriter{dst}, io.LimitReader(src, st.Size), a.buf)
	if err != nil {
		return pathErr(a.op(), relJoin(a.top, name), err)
	}
	if k != st.Size {
		return fmt.Errorf("archive %s: %w: it shrank from %d to %d bytes while being read", relJoin(a.top, name), ErrChangedWhileCopied, st.Size, k)
	}
	return a.observed(fd, name, &st)
}

// mode is the header mode of an entry of mode m (a directory when dir).
func (a *archiver) mode(m fs.FileMode, dir bool) int64 {
	switch {
	case !a.opts.SanitizeModes:
		return int64(m.Perm())
	case dir:
		return sanitizedDirMode
	}
	return int64(SanitizeMode(int64(m.Perm())))
}
