//go:build unix

package hostfs

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/sandbox"
)

// CopyTreeOptions tune CopyTree.
type CopyTreeOptions struct {
	// Exclude, Strict, Digest and Observe are ArchiveOptions': the walk is the
	// archive's, so the entries copied and the digest are the ones a tar
	// of the same tree would give.
	Exclude func(rel string, isDir bool) bool
	Strict  bool
	Digest  io.Writer
	Observe func(rel string, st sandbox.EntryStat)
	// Limits are Extract's (zero fields take its defaults).
	Limits ExtractLimits

	// readWrite copies every file through a buffer, as on a file system
	// without copy_file_range (tests force the fallback with it).
	readWrite bool
	// settledAge replaces the package's settledAge when not zero (tests
	// take every file as settled with a negative one).
	settledAge time.Duration
}

// CopyTree copies directory srcDir of src into directory dstDir of dst
// (created if missing) without a tar stream: the result is the one
// Extract gives for Archive's tar of the tree. Entries are walked as
// Archive walks them (sorted, depth first, never following a symlink,
// excludes applied, symlinks and special files refused when Strict) and
// written as Extract writes members: files with sanitized modes (0644, or
// 0755 with any execute bit) and their modification time to the second,
// directories created 0755, symlinks with their target as it is; an
// existing file or symlink is replaced (never written through), a
// non-empty directory in the way is an error, and nothing is written
// beneath a symlink in dst (ErrPathEscape). The limits are Extract's.
//
// File contents go from file to file in the kernel: a reflink (FICLONE)
// where the file system shares blocks between files (btrfs, xfs), else
// copy_file_range; where neither works (another file system, an older
// kernel) they are read and written through a buffer. With Digest set,
// a file is read through the buffer and hashed as it is written, unless
// the Digest reads files itself (FileDigest) and the file last changed
// more than settledAge ago: the digest's goroutine reads it again,
// checking that it did not change meanwhile, and a worker goroutine
// copies it in the kernel and sets its mode and time while the walk goes
// on (copyWorker); CopyTree returns once the worker is done.
func CopyTree(ctx context.Context, src *Dir, srcDir string, dst *Dir, dstDir string, opts CopyTreeOptions) error {
	r, err := rel(srcDir)
	if err != nil {
		return err
	}
	base, err := rel(dstDir)
	if err != nil {
		return err
	}
	f, err := src.openDir(r)
	if err != nil {
		return pathErr("read", srcDir, err)
	}
	defer f.Close()
	chain, err := newDirChain(int(f.Fd()))
	if err != nil {
		return pathErr("read", srcDir, err)
	}
	defer chain.close()
	top, err := dst.walkDir(base, true)
	if err != nil {
		return pathErr("write", dstDir, err)
	}
	cp := &treeCopier{dst: dst, lim: opts.Limits.withDefaults(), settledAge: settledAge}
	cp.noClone.Store(opts.readWrite)
	cp.noCopyRange.Store(opts.readWrite)
	if opts.settledAge != 0 {
		cp.settledAge = opts.settledAge
	}
	cp.levels = []copyLevel{{rel: base, f: top}}
	defer func() {
		for len(cp.levels) > 1 {
			cp.leave()
		}
		top.Close()
	}()
	a := archiver{ctx: ctx, opts: ArchiveOptions{Exclude: opts.Exclude, Strict: opts.Strict, Digest: opts.Digest, Observe: opts.Observe}, buf: make([]byte, 256<<10), top: r, chain: chain, cp: cp}
	err = a.run()
	// Every file is complete (or the copy failed) once the worker is done.
	if werr := cp.finish(err != nil); err == nil {
		err = werr
	}
	return err
}

// CopyTreeIn copies the host tree into directory dir of the workspace
// with CopyTree and the default limits (sandbox.HostTreeCopier).
func (d *Dir) CopyTreeIn(ctx context.Context, dir string, t sandbox.HostTree) error {
	src, err := OpenRoot(t.Root)
	if err != nil {
		return err
	}
	defer src.Close()
	return CopyTree(ctx, src, t.Dir, d, dir, CopyTreeOptions{Exclude: t.Exclude, Strict: t.Strict, Digest: t.Digest, Observe: t.Observe})
}

// treeCopier writes what an archiver's walk finds into a directory of a
// Dir, as Extract would write the walk's tar.
type treeCopier struct {
	dst *Dir
	// levels are the destination directories from the top (levels[0],
	// owned by CopyTree) down to the one being filled; at most
	// maxOpenDirs are open, the others (fd -1) are opened again by path
	// from the workspace root, one component at a time, when needed.
	levels []copyLevel
	open   int
	lim    ExtractLimits
	// members and bytes count against lim as Extract counts headers
	// and file content.
	members    int
	bytes      int64
	settledAge time.Duration
	// kernelCopier copies the content; its worker, started by the first
	// file the kernel copies while the digest reads it, copies those
	// files' content and sets their mode and time while the walk goes on.
	kernelCopier
}

type copyLevel struct {
	rel string   // workspace-relative
	f   *os.File // nil while closed
}

// count applies the member and byte limits to one more entry.
func (c *treeCopier) count(name string, size int64) error {
	c.members++
	if c.members > c.lim.MaxMembers {
		return fmt.Errorf("the tree has more than %d entries: %w", c.lim.MaxMembers, ErrUnsafeArchive)
	}
	c.bytes += size
	if c.bytes > c.lim.MaxBytes {
		return fmt.Errorf("copy %s: the tree's content exceeds the limit of %d bytes: %w", name, c.lim.MaxBytes, ErrUnsafeArchive)
	}
	if _, err := sandbox.CheckEntryPath(name); err != nil {
		return fmt.Errorf("copy %q: bad path: %w: %w", name, ErrUnsafeArchive, err)
	}
	return nil
}

// cur is the destination directory being filled, opened again if it was
// closed to bound the descriptors held.
func (c *treeCopier) cur() (int, error) {
	l := &c.levels[len(c.levels)-1]
	if l.f == nil {
		f, err := c.dst.walkDir(l.rel, false)
		if err != nil {
			return -1, err
		}
		l.f = f
		c.open++
	}
	return int(l.f.Fd()), nil
}

// enter creates (or opens) directory n of the current one, never through
// a symlink, and makes it current.
func (c *treeCopier) enter(n, name string) error {
	target := relJoin(c.levels[0].rel, name)
	if err := c.count(name, 0); err != nil {
		return err
	}
	pfd, err := c.cur()
	if err != nil {
		return pathErr("write", target, err)
	}
	f, err := walkDirAt(pfd, n, true)
	if err != nil {
		return pathErr("write", target, err)
	}
	c.levels = append(c.levels, copyLevel{rel: target, f: f})
	c.open++
	// Close the shallowest open levels (never the top or the new one).
	for i := 1; c.open > maxOpenDirs && i < len(c.levels)-1; i++ {
		if c.levels[i].f != nil {
			c.levels[i].f.Close()
			c.levels[i].f = nil
			c.open--
		}
	}
	return nil
}

// leave makes the parent of the current directory current again.
func (c *treeCopier) leave() {
	last := len(c.levels) - 1
	if last == 0 {
		return
	}
	if f := c.levels[last].f; f != nil {
		f.Close()
		c.open--
	}
	c.levels = c.levels[:last]
}

// symlink creates symlink n of the current directory with target as it
// is, replacing what is there (a file, a link, an empty directory).
func (c *treeCopier) symlink(n, name, target string) error {
	dst := relJoin(c.levels[0].rel, name)
	if err := c.count(name, 0); err != nil {
		return err
	}
	if len(target) >= 4096 {
		return fmt.Errorf("copy %q: symlink target longer than 4095 bytes: %w", name, ErrUnsafeArchive)
	}
	pfd, err := c.cur()
	if err != nil {
		return pathErr("write", dst, err)
	}
	if err := clearAt(pfd, n); err != nil {
		return pathErr("write", dst, err)
	}
	return pathErr("write", dst, unix.Symlinkat(target, pfd, n))
}

// file copies size bytes of the open regular file src to file n of the
// current directory, replacing what is there, and feeds digest (when
// set) with the content as it is copied. taken reports that src went to
// the worker with the file, which closes it.
func (c *treeCopier) file(src fdFile, st *unix.Stat_t, n, name string, mode fs.FileMode, mtime time.Time, digest io.Writer, buf []byte) (taken bool, err error) {
	size := st.Size
	target := relJoin(c.levels[0].rel, name)
	if err := c.count(name, size); err != nil {
		return false, err
	}
	pfd, err := c.cur()
	if err != nil {
		return false, pathErr("write", target, err)
	}
	perm := SanitizeMode(int64(mode.Perm()))
	fd, err := createAt(pfd, n, perm)
	if err != nil {
		return false, pathErr("write", target, err)
	}
	dst := fdFile{fd, target}
	ts := [2]unix.Timespec{unix.NsecToTimespec(mtime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	finish := fileFinish(dst, perm, &ts)
	if fdg, ok := digest.(FileDigest); ok && st.Size > 0 && !c.noCopyRange.Load() && settled(st, c.settledAge) {
		// The digest reads the file on its goroutine, at its place in
		// the stream; the worker copies it in the kernel (no user-space
		// copy to wait for), sets its mode and time and closes it, while
		// the walk goes on.
		if err := hashSettled(fdg, src, st); err != nil {
			dst.Close()
			return false, pathErr("read", target, err)
		}
		return true, c.send(copyJob{name: target, dst: dst, src: src, size: st.Size, finish: finish})
	}
	// Otherwise the walk copies it itself (a digest reading through buf).
	if err = c.copyData(dst, src, 0, 0, st.Size, digest, buf); err != nil {
		err = fmt.Errorf("copy %s: %w", target, err)
	}
	if ferr := finish(err); err == nil {
		err = ferr
	}
	return false, err
}

// hashSettled gives the digest a duplicate of the settled file src
// (which it closes once read) to hash at this point of the stream, with
// a check that it did not change since the walk took its status st.
func hashSettled(digest FileDigest, src fdFile, st *unix.Stat_t) error {
	dup, err := unix.FcntlInt(uintptr(src.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := fdFile{fd: dup, name: src.name}
	digest.WriteFile(f, st.Size, func() error {
		var now unix.Stat_t
		if err := unix.Fstat(f.fd, &now); err != nil {
			return err
		}
		if !sameContent(st, &now) {
			return ErrChangedWhileCopied
		}
		return nil
	})
	return nil
}

// FileDigest is a CopyTreeOptions.Digest that can read a file's content
// itself, off the copying goroutine (hashpipe.Writer): CopyTree then
// copies a file in the kernel and gives the digest the file (a duplicate
// of its descriptor, which the digest closes) to hash at its place in
// the stream, with a check that fails (ErrChangedWhileCopied) when the
// file changed since the walk measured it. The digest's owner must treat
// a failed check as a digest of nothing (copy again).
type FileDigest interface {
	io.Writer
	WriteFile(f hashpipe.File, size int64, check func() error)
}

// ErrChangedWhileCopied is the error of a FileDigest's check, and
// hashpipe's for a file shorter than it was when copied.
var ErrChangedWhileCopied = hashpipe.ErrChanged

// settledAge is how long ago a file must have last changed for its
// content to be copied in the kernel and hashed from a second read: any
// write after the walk's fstat then changes its ctime to a later value,
// which the check sees (a file changed within the clock's granularity of
// that fstat could not be told from an unchanged one).
const settledAge = 2 * time.Second

// settled reports whether the file last changed more than age ago.
func settled(st *unix.Stat_t, age time.Duration) bool {
	limit := time.Now().Add(-age)
	return time.Unix(st.Ctim.Unix()).Before(limit) && time.Unix(st.Mtim.Unix()).Before(limit)
}
