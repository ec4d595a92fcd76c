//go:build unix

package hostfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/sandbox"
)

// ErrUnsafeArchive is returned (wrapped) when a tar stream holds a member
// the safe extractor refuses: a hardlink, device, FIFO or other special
// file, a member beneath a symlink, or one past the limits.
var ErrUnsafeArchive = errors.New("unsafe archive")

// Defaults for ExtractLimits fields left zero.
const (
	DefaultExtractMaxBytes       int64 = 16 << 30
	DefaultExtractMaxMembers           = 1 << 20
	DefaultExtractMaxSparseBytes int64 = 1 << 40
)

// ExtractLimits bound what one tar stream may create. Zero fields take the
// defaults (16 GiB of file content, 1,048,576 members, 1 TiB of sparse
// files).
type ExtractLimits struct {
	// MaxBytes is the total size of regular file content written: the
	// whole size of ordinary members, the data (not the holes) of sparse
	// ones.
	MaxBytes int64
	// MaxMembers is the number of tar headers, of every type.
	MaxMembers int
	// MaxSparseBytes is the total logical size of sparse members (PAX
	// sparse format, which only Extract accepts): their holes cost no
	// disk, but reading them costs time.
	MaxSparseBytes int64
}

func (l ExtractLimits) withDefaults() ExtractLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultExtractMaxBytes
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = DefaultExtractMaxMembers
	}
	if l.MaxSparseBytes <= 0 {
		l.MaxSparseBytes = DefaultExtractMaxSparseBytes
	}
	return l
}

// File modes after sanitizing: every regular file becomes 0644, or 0755
// when any execute bit was set; directories 0755. Set-id and sticky bits,
// ownership and write permission for others never survive.
const (
	sanitizedFileMode = 0o644
	sanitizedExecMode = 0o755
	sanitizedDirMode  = 0o755
)

// SanitizeMode is the permission a regular file with mode m gets when
// extracted: sanitizedExecMode when any execute bit is set,
// sanitizedFileMode otherwise.
func SanitizeMode(m int64) uint32 {
	if m&0o111 != 0 {
		return sanitizedExecMode
	}
	return sanitizedFileMode
}

// member is one checked tar header.
type member struct {
	name string // clean, relative to the extraction directory
	kind byte   // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	mode uint32
	// sparse is a sparse regular file: its holes are written as holes.
	sparse bool
}

// tarChecker applies the safe-extraction rules to a stream's headers.
type tarChecker struct {
	lim     ExtractLimits
	members int
	bytes   int64
	// sparseOK accepts PAX sparse members (Extract writes their holes as
	// holes; other extractors would write zeros).
	sparseOK    bool
	sparseBytes int64
	// keepPerms keeps members' permission bits (ExtractOptions).
	keepPerms bool
	// links holds the symlink members seen so far: nothing may be
	// extracted beneath one.
	links map[string]bool
}

func unsafeMember(name, why string, wrap ...error) error {
	err := fmt.Errorf("archive member %q: %s: %w", name, why, ErrUnsafeArchive)
	for _, w := range wrap {
		err = fmt.Errorf("%w: %w", err, w)
	}
	return err
}

// check validates hdr; skip is true for headers that create nothing.
func (c *tarChecker) check(hdr *tar.Header) (m member, skip bool, err error) {
	c.members++
	if c.members > c.lim.MaxMembers {
		return m, false, fmt.Errorf("archive has more than %d members: %w", c.lim.MaxMembers, ErrUnsafeArchive)
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return m, true, nil
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		// tar.Reader reports the legacy TypeRegA as TypeReg (or TypeDir
		// for a name ending in a slash), so old archives arrive here too.
	case tar.TypeLink:
		return m, false, unsafeMember(hdr.Name, "hardlinks are not allowed")
	case tar.TypeChar, tar.TypeBlock:
		return m, false, unsafeMember(hdr.Name, "device files are not allowed")
	case tar.TypeFifo:
		return m, false, unsafeMember(hdr.Name, "FIFOs are not allowed")
	default:
		return m, false, unsafeMember(hdr.Name, fmt.Sprintf("unsupported member type %q", hdr.Typeflag))
	}
	if isSparse(hdr) {
		if !c.sparseOK {
			// The reader expands holes into zeros: a tiny archive could
			// fill the disk.
			return m, false, unsafeMember(hdr.Name, "sparse files are not supported")
		}
		m.sparse = true
	}
	name := hdr.Name
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	name = strings.TrimSuffix(name, "/")
	if name == "" || name == "." {
		return m, true, nil // the extraction directory itself
	}
	clean, err := sandbox.CheckEntryPath(name)
	if err != nil {
		return m, false, unsafeMember(hdr.Name, "bad path", err)
	}
	if len(clean) > 4096 {
		return m, false, unsafeMember(hdr.Name[:64]+"…", "path longer than 4096 bytes")
	}
	m.name = clean
	for p := clean; ; {
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
		if c.links[p] {
			return m, false, unsafeMember(hdr.Name, fmt.Sprintf("it lies beneath the symlink member %q; archives may not write through symlinks", p), sandbox.ErrPathEscape)
		}
	}
	if hdr.Typeflag == tar.TypeSymlink {
		if c.links == nil {
			c.links = map[string]bool{}
		}
		c.links[clean] = true
	} else {
		delete(c.links, clean)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		m.kind, m.mode = tar.TypeDir, sanitizedDirMode
		if c.keepPerms {
			m.mode = uint32(hdr.Mode)&0o777 | 0o700
		}
	case tar.TypeSymlink:
		// The link is created as it is, whatever its target: an absolute
		// target or one that climbs out of the workspace is legal inside
		// a sandbox (a Python venv holds both). It is safe because the
		// target is never resolved here: nothing is extracted beneath a
		// symlink (above), and every later host-side access to the
		// workspace resolves paths beneath its root (Dir) or inside the
		// sandbox.
		m.kind = tar.TypeSymlink
		if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return m, false, unsafeMember(hdr.Name, "empty symlink target, or a NUL byte in it")
		}
		if len(hdr.Linkname) >= 4096 {
			return m, false, unsafeMember(hdr.Name, "symlink target longer than 4095 bytes")
		}
	default:
		m.kind, m.mode = tar.TypeReg, SanitizeMode(hdr.Mode)
		if c.keepPerms {
			m.mode = uint32(hdr.Mode) & 0o777
		}
		if hdr.Size < 0 {
			return m, false, unsafeMember(hdr.Name, "negative size")
		}
		if m.sparse {
			// Its data counts against MaxBytes as it is written.
			c.sparseBytes += hdr.Size
			if c.sparseBytes > c.lim.MaxSparseBytes {
				return m, false, fmt.Errorf("archive member %q: sparse files exceed the limit of %d bytes: %w", hdr.Name, c.lim.MaxSparseBytes, ErrUnsafeArchive)
			}
			break
		}
		c.bytes += hdr.Size
		if c.bytes > c.lim.MaxBytes {
			return m, false, fmt.Errorf("archive member %q: archive content exceeds the limit of %d bytes: %w", hdr.Name, c.lim.MaxBytes, ErrUnsafeArchive)
		}
	}
	return m, false, nil
}

// ExtractOptions tune ExtractWith.
type ExtractOptions struct {
	Limits ExtractLimits
	// KeepPermissions keeps each member's permission bits (0o777) instead
	// of normalizing files to 0644/0755 and directories to 0755;
	// directories always keep owner rwx. Set-id and sticky bits are
	// dropped either way. A restore keeps a workspace's modes with it.
	KeepPermissions bool
}

// Extract is ExtractWith with limits lim, sanitizing modes.
func Extract(ctx context.Context, d *Dir, dir string, r io.Reader, lim ExtractLimits) error {
	return ExtractWith(ctx, d, dir, r, ExtractOptions{Limits: lim})
}

// ExtractWith unpacks the tar stream r into directory dir of d (workspace-
// relative, created if missing), refusing what could reach outside the
// workspace or harm the host: absolute member names and any ".." element,
// hardlinks, devices, FIFOs, and streams past the limits. Modes are
// sanitized (see sanitizedFileMode) unless opts.KeepPermissions is set,
// when only set-id and sticky bits are dropped; owners are not restored;
// modification times are. Members replace existing files and symlinks
// (the link itself, never its target); a member that would replace a
// non-empty directory is an error. Extraction never goes through a
// symlink: a member whose parent path (or the extraction directory) holds
// a symlink, whether it came from the archive or was already in the
// workspace, is refused. So a symlink's place in the tree is exactly its
// member name, and its target, whatever it is (absolute, or climbing out
// of the workspace), is stored as it is and never followed on the host.
// Extraction stops at the first refused member; members before it stay
// extracted.
func ExtractWith(ctx context.Context, d *Dir, dir string, r io.Reader, opts ExtractOptions) (err error) {
	base, err := rel(dir)
	if err != nil {
		return err
	}
	if f, err := d.walkDir(base, true); err != nil {
		return pathErr("extract", dir, err)
	} else {
		f.Close()
	}
	c := tarChecker{lim: opts.Limits.withDefaults(), sparseOK: true, keepPerms: opts.KeepPermissions}
	// A regular member's content from a ContentSource stream is copied
	// in the kernel by a worker, one from a ContentWriter stream written
	// from its buffers; the tar reader then passes over it (credit).
	var direct *creditReader
	cw, isWriter := r.(ContentWriter)
	cs, isSource := r.(ContentSource)
	if isWriter || isSource {
		direct = &creditReader{r: r, cw: cw, cs: cs}
		r = direct
		if isSource {
			// Every member is complete, or the extraction failed, once
			// the worker is done.
			defer func() {
				if werr := direct.kc.finish(err != nil); err == nil {
					err = werr
				}
			}()
		}
	}
	tr := tar.NewReader(r)
	var (
		cacheName string
		cacheDir  *os.File
	)
	defer func() {
		if cacheDir != nil {
			cacheDir.Close()
		}
	}()
	parentOf := func(target string) (int, error) {
		pd := path.Dir(target)
		if cacheDir != nil && cacheName == pd {
			return int(cacheDir.Fd()), nil
		}
		if cacheDir != nil {
			cacheDir.Close()
			cacheDir = nil
		}
		f, err := d.walkDir(pd, true)
		if err != nil {
			return -1, err
		}
		cacheName, cacheDir = pd, f
		return int(f.Fd()), nil
	}
	buf := make([]byte, 256<<10)
	var times dirTimes
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return times.apply(d)
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		m, skip, err := c.check(hdr)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		target := relJoin(base, m.name)
		switch m.kind {
		case tar.TypeDir:
			// Archives list a directory's members right after it: it
			// becomes the cached parent, and it is entered from the
			// cached one, so a deep tree is not walked from the root for
			// every member.
			var f *os.File
			if cacheDir != nil && cacheName == path.Dir(target) {
				f, err = walkDirAt(int(cacheDir.Fd()), path.Base(target), true)
			} else {
				f, err = d.walkDir(target, true)
			}
			if err == nil && c.keepPerms {
				err = unix.Fchmod(int(f.Fd()), m.mode)
			}
			if err != nil {
				if f != nil {
					f.Close()
				}
				return pathErr("extract", target, err)
			}
			if cacheDir != nil {
				cacheDir.Close()
			}
			cacheName, cacheDir = target, f
			times.add(target, hdr.ModTime)
		case tar.TypeSymlink:
			pfd, err := parentOf(target)
			if err != nil {
				return pathErr("extract", target, err)
			}
			name := path.Base(target)
			if err := clearAt(pfd, name); err != nil {
				return pathErr("extract", target, err)
			}
			if err := unix.Symlinkat(hdr.Linkname, pfd, name); err != nil {
				return pathErr("extract", target, err)
			}
			if err := setLinkTime(pfd, name, hdr.ModTime); err != nil {
				return pathErr("extract", target, err)
			}
			// A later member's parent may now resolve differently.
			cacheDir.Close()
			cacheDir = nil
		default:
			pfd, err := parentOf(target)
			if err != nil {
				return pathErr("extract", target, err)
			}
			var written func(int64) error
			if m.sparse {
				written = func(n int64) error {
					if c.bytes += n; c.bytes > c.lim.MaxBytes {
						return fmt.Errorf("archive content exceeds the limit of %d bytes: %w", c.lim.MaxBytes, ErrUnsafeArchive)
					}
					return nil
				}
			}
			if err := writeMember(ctx, pfd, path.Base(target), m.mode, hdr, tr, buf, written, direct); err != nil {
				return pathErr("extract", target, err)
			}
		}
	}
}

// dirTimes are the modification times of the directory members
// extracted, set once the archive is done (creating their entries
// changed them), so that a restored tree archives as it was archived.
type dirTimes []struct {
	dir   string
	mtime time.Time
}

func (t *dirTimes) add(dir string, mtime time.Time) {
	if !mtime.IsZero() {
		*t = append(*t, struct {
			dir   string
			mtime time.Time
		}{dir, mtime})
	}
}

// apply sets the times, deepest (last listed) first.
func (t dirTimes) apply(d *Dir) error {
	for i := len(t) - 1; i >= 0; i-- {
		f, err := d.walkDir(t[i].dir, false)
		if err != nil {
			return pathErr("extract", t[i].dir, err)
		}
		ts := unix.NsecToTimespec(t[i].mtime.UnixNano())
		err = setTimes(int(f.Fd()), &[2]unix.Timespec{ts, ts})
		f.Close()
		if err != nil {
			return pathErr("extract", t[i].dir, err)
		}
	}
	return nil
}

// setLinkTime sets the modification time of symlink name in dirfd (the
// link's own, never its target's); a zero mtime leaves it.
func setLinkTime(dirfd int, name string, mtime time.Time) error {
	if mtime.IsZero() {
		return nil
	}
	ts := unix.NsecToTimespec(mtime.UnixNano())
	return unix.UtimesNanoAt(dirfd, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

// clearAt removes a non-directory entry name in dirfd so it can be
// replaced; a missing entry is fine, a directory is a conflict.
func clearAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	switch err {
	case nil, unix.ENOENT:
		return nil
	case unix.EISDIR:
		// An empty directory may be replaced; a full one is a conflict.
		if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil {
			return fmt.Errorf("a directory is in the way: %w", err)
		}
		return nil
	}
	return err
}

// createAt creates file name in dirfd for writing (and reading: a
// ContentSource's digest reads the content back), with mode, never
// through a symlink: what is there already (a file, a link, an empty
// directory) is replaced, not written through. The common case, nothing
// there, costs one openat.
func createAt(dirfd int, name string, mode uint32) (int, error) {
	const flags = unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, mode)
	if err != unix.EEXIST {
		return fd, err
	}
	if err := clearAt(dirfd, name); err != nil {
		return -1, err
	}
	return unix.Openat(dirfd, name, flags, mode)
}

// writeMember creates file name in dirfd from hdr and its content in r.
// With written set (a sparse member), blocks of zeros become holes and
// written is told the bytes actually written. With direct set, the
// content is copied by the worker (ContentSource) or written from the
// stream's buffers (ContentWriter) instead of being read from r.
func writeMember(ctx context.Context, dirfd int, name string, mode uint32, hdr *tar.Header, r io.Reader, buf []byte, written func(int64) error, direct *creditReader) (err error) {
	fd, err := createAt(dirfd, name, mode)
	if err != nil {
		return err
	}
	// Written with plain system calls (fdFile), except a sparse member,
	// whose holes need an *os.File's WriteAt and Truncate.
	ff := fdFile{fd, name}
	var f io.Closer = ff
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	// The member's times, none without a modification time.
	var ts *[2]unix.Timespec
	if !hdr.ModTime.IsZero() {
		t := unix.NsecToTimespec(hdr.ModTime.UnixNano())
		ts = &[2]unix.Timespec{t, t}
	}
	if written != nil {
		of := os.NewFile(uintptr(fd), name)
		f = of
		if err := writeHoles(ctx, of, r, hdr.Size, buf, written); err != nil {
			return err
		}
	} else {
		if direct != nil && direct.cs != nil {
			taken, err := direct.copyContent(fd, hdr, mode, ts)
			if taken {
				// The worker copies the content, sets the mode and
				// times and closes the file.
				f = nopCloser{}
			}
			if taken || err != nil {
				return err
			}
		}
		var n int64
		var err error
		done := false
		if direct != nil {
			done, n, err = direct.writeContent(ff, hdr.Size)
		}
		if !done {
			n, err = io.CopyBuffer(onlyWriter{ff}, io.LimitReader(r, hdr.Size), buf)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || err == nil && n != hdr.Size {
			return fmt.Errorf("archive truncated: %d of %d bytes: %w", n, hdr.Size, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return err
		}
	}
	return setModeTimes(fd, mode, ts)
}

// ContentWriter is an Extract input that can write the next n bytes of
// its stream to a writer from buffers of its own (hashpipe.TeeReader's
// WriteN): a regular member's content then goes from the stream's buffer
// to its file, without a copy into the extractor's buffer. It returns how
// many bytes it wrote, fewer than n only with an error.
type ContentWriter interface {
	io.Reader
	WriteN(w io.Writer, n int64) (int64, error)
}

// ContentSource is an Extract input whose stream lies in a file it reads
// (a snapshot file): a regular member's content is copied from there into
// the member's file in the kernel, by a worker goroutine, while the
// extractor reads the next headers. ContentRange is given the member's
// new file fd (open for reading and writing: a digest may read the
// content back from a duplicate of it), name, the member's name, and the
// content's length n; it moves the stream past the content and returns
// where the content lies. ok false, with nothing consumed, means the
// content is written as any other (as a ContentWriter's, or read from
// the stream).
type ContentSource interface {
	io.Reader
	ContentRange(fd int, name string, n int64) (rg FileRange, ok bool, err error)
}

// FileRange is a range of an open file Fd from offset Off, which stays
// open until the Extract or Archive it was given to returns: where a
// member's content lies (ContentSource), or where a file's content goes
// in an archive (FileAppender). Done, when set, is called once with the
// outcome of the copy from or to the range: nil once the content is in
// place, or why it is not.
type FileRange struct {
	Fd   int
	Off  int64
	Done func(error)
}

// creditReader is the tar reader's view of a ContentWriter or
// ContentSource stream: the content the stream put in a member's file
// itself (credit, which directly follows the member's header) is passed
// over when the tar reader skips it to the next header, with Seek or by
// reading it (Read gives zeros for it); past the credit, both read the
// stream.
type creditReader struct {
	r      io.Reader
	cw     ContentWriter // r, when it is one
	cs     ContentSource // r, when it is one
	kc     kernelCopier  // cs's members are copied by its worker
	credit int64
	pos    int64
}

// copyContent hands the member's content, which the ContentSource
// stream lies in, to the worker to copy into the member's new file fd,
// then set its mode and times ts and close it, and credits it to the tar
// reader. taken reports that the worker owns fd; false, with no error,
// that the stream cannot (the content is then written as any other).
func (c *creditReader) copyContent(fd int, hdr *tar.Header, mode uint32, ts *[2]unix.Timespec) (taken bool, err error) {
	rg, ok, err := c.cs.ContentRange(fd, hdr.Name, hdr.Size)
	if err != nil || !ok {
		return false, err
	}
	c.credit += hdr.Size
	dst := fdFile{fd, hdr.Name}
	return true, c.kc.send(copyJob{name: hdr.Name, dst: dst, src: fdFile{rg.Fd, hdr.Name}, from: rg.Off, size: hdr.Size, keepSrc: true, finish: fileFinish(dst, mode, ts), done: rg.Done})
}

// writeContent writes the next n bytes of the stream to f as a member's
// content from the stream's buffers (ContentWriter), and credits them to
// the tar reader. It reports false, with nothing consumed, when the
// stream cannot: the caller then reads them.
func (c *creditReader) writeContent(f fdFile, n int64) (bool, int64, error) {
	if c.cw != nil {
		k, err := c.cw.WriteN(f, n)
		c.credit += k
		return true, k, err
	}
	return false, 0, nil
}

func (c *creditReader) Read(p []byte) (int, error) {
	if c.credit > 0 {
		k := int(min(int64(len(p)), c.credit))
		clear(p[:k])
		c.credit -= int64(k)
		c.pos += int64(k)
		return k, nil
	}
	n, err := c.r.Read(p)
	c.pos += int64(n)
	return n, err
}

// Seek moves forward only (io.SeekCurrent): over the credit, then by
// reading the stream.
func (c *creditReader) Seek(off int64, whence int) (int64, error) {
	if whence != io.SeekCurrent || off < 0 {
		return c.pos, errors.New("the archive stream only skips forward")
	}
	k := min(off, c.credit)
	c.credit -= k
	c.pos += k
	if rest := off - k; rest > 0 {
		n, err := io.CopyN(io.Discard, c.r, rest)
		c.pos += n
		if err != nil {
			return c.pos, err
		}
	}
	return c.pos, nil
}

// nopCloser is a descriptor's closer once another owns it.
type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// onlyWriter hides *os.File's ReadFrom so CopyBuffer uses our buffer.
type onlyWriter struct{ io.Writer }

// SanitizeOptions tune SanitizeTar.
type SanitizeOptions struct {
	Limits ExtractLimits
	// UID and GID are written as the owner of every member (the sandbox
	// user, for extractors that apply owners); zero means root.
	UID, GID int
	// KeepPermissions keeps each member's permission bits (0o777) instead
	// of normalizing files to 0644/0755; directories always keep owner
	// rwx. Set-id and sticky bits are dropped either way.
	KeepPermissions bool
}

// SanitizeTar copies the tar stream r to w applying the checks of Extract
// (for extraction into directory dir of the workspace) and normalizing
// every header: clean relative names, sanitized modes, owner
// opts.UID:opts.GID, no extended attributes or PAX records. It is for
// providers whose extraction happens elsewhere (a container engine's or a
// remote API's), so that every provider refuses the same archives.
// Symlinks keep their target, whatever it is, as with Extract: those
// extractors work inside the sandbox (a container's root, a remote
// machine), so an absolute target means what it meant when the link was
// archived, and nothing of the same archive is sent beneath a link.
//
// Such an extractor cannot be told not to follow a symlink already in the
// workspace, so every parent directory of a member is sent first as an
// explicit directory member (once per archive): extractors replace a
// non-directory with a directory for such a member, so an existing
// symlink is replaced by a real directory instead of being written
// through. For the same reason a non-directory member that would replace
// a directory sent earlier in the stream is refused.
func SanitizeTar(ctx context.Context, dir string, r io.Reader, w io.Writer, opts SanitizeOptions) error {
	_, err := sanitizeTar(ctx, dir, r, w, opts, false)
	return err
}

// Link is a symlink member: Name is relative to the extraction directory,
// Target is the link's target as archived, ModTime its modification time
// (to the second).
type Link struct {
	Name, Target string
	ModTime      time.Time
}

// SanitizeTarDeferLinks is SanitizeTar for extractors that refuse a
// relative symlink whose target climbs out of the extraction directory
// (docker's: "invalid symlink"), although such a link is legal in a
// workspace. Those links are left out of w and returned in archive order
// for the caller to create afterwards, from a directory above the
// extraction directory; their parent directories are in w. A later member
// of the same name drops a deferred link, as it would have replaced it.
func SanitizeTarDeferLinks(ctx context.Context, dir string, r io.Reader, w io.Writer, opts SanitizeOptions) ([]Link, error) {
	return sanitizeTar(ctx, dir, r, w, opts, true)
}

func sanitizeTar(ctx context.Context, dir string, r io.Reader, w io.Writer, opts SanitizeOptions, deferLinks bool) ([]Link, error) {
	if _, err := rel(dir); err != nil {
		return nil, err
	}
	var deferred []Link
	deferredAt := map[string]int{} // index in deferred by name
	undefer := func(name string) {
		if i, ok := deferredAt[name]; ok {
			deferred[i].Name = "" // dropped
			delete(deferredAt, name)
		}
	}
	c := tarChecker{lim: opts.Limits.withDefaults(), keepPerms: opts.KeepPermissions}
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	now := time.Now().Truncate(time.Second)
	dirs := map[string]bool{}  // directories sent so far
	links := map[string]bool{} // symlinks sent so far
	writeDir := func(name string, mode int64, mtime time.Time) error {
		dirs[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode,
			Uid: opts.UID, Gid: opts.GID, ModTime: mtime})
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return slices.DeleteFunc(deferred, func(l Link) bool { return l.Name == "" }), tw.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		m, skip, err := c.check(hdr)
		if err != nil {
			return nil, err
		}
		if skip {
			continue
		}
		for i := 0; i < len(m.name); i++ {
			if m.name[i] == '/' && !dirs[m.name[:i]] {
				if err := writeDir(m.name[:i], sanitizedDirMode, now); err != nil {
					return nil, fmt.Errorf("archive member %q: %w", hdr.Name, err)
				}
			}
		}
		mode := int64(m.mode)
		if m.kind == tar.TypeDir {
			if links[m.name] {
				// Some extractors (busybox tar) keep an existing link for
				// a directory member and then write through it.
				return nil, unsafeMember(hdr.Name, "a directory would replace a symlink of the same archive", sandbox.ErrPathEscape)
			}
			if err := writeDir(m.name, mode, hdr.ModTime.Truncate(time.Second)); err != nil {
				return nil, fmt.Errorf("archive member %q: %w", hdr.Name, err)
			}
			continue
		}
		if dirs[m.name] {
			return nil, unsafeMember(hdr.Name, "it would replace a directory of the same archive")
		}
		out := &tar.Header{Name: m.name, ModTime: hdr.ModTime.Truncate(time.Second), Mode: mode, Uid: opts.UID, Gid: opts.GID}
		undefer(m.name)
		if m.kind == tar.TypeSymlink {
			links[m.name] = true
			if deferLinks && !strings.HasPrefix(hdr.Linkname, "/") && !symlinkStaysInside(m.name, hdr.Linkname) {
				deferredAt[m.name] = len(deferred)
				deferred = append(deferred, Link{Name: m.name, Target: hdr.Linkname, ModTime: hdr.ModTime.Truncate(time.Second)})
				continue
			}
			out.Typeflag, out.Linkname, out.Mode = tar.TypeSymlink, hdr.Linkname, 0o777
		} else {
			out.Typeflag, out.Size = tar.TypeReg, hdr.Size
			delete(links, m.name)
		}
		if err := tw.WriteHeader(out); err != nil {
			return nil, fmt.Errorf("archive member %q: %w", hdr.Name, err)
		}
		if out.Typeflag == tar.TypeReg {
			if n, err := io.Copy(tw, tr); err != nil || n != hdr.Size {
				return nil, fmt.Errorf("archive member %q: copy: %v (%d of %d bytes)", hdr.Name, err, n, hdr.Size)
			}
		}
	}
}

// walkDir opens directory r (clean, workspace-relative) one component at
// a time without following any symlink, creating missing components when
// create is set. A symlink on the way is refused with ErrPathEscape.
func (d *Dir) walkDir(r string, create bool) (*os.File, error) {
	return walkDirAt(d.fd, r, create)
}

// walkDirAt is walkDir from directory start instead of the root.
func walkDirAt(start int, r string, create bool) (*os.File, error) {
	cur, err := unix.Openat(start, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if r != "." && r != "" {
		for _, comp := range strings.Split(r, "/") {
			next, err := unix.Openat(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == unix.ENOENT && create {
				if err = unix.Mkdirat(cur, comp, sanitizedDirMode); err == nil || err == unix.EEXIST {
					next, err = unix.Openat(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				}
			}
			if err == unix.ELOOP || err == unix.ENOTDIR {
				var st unix.Stat_t
				if unix.Fstatat(cur, comp, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					err = fmt.Errorf("%s is a symlink; extraction never writes through symlinks: %w", comp, sandbox.ErrPathEscape)
				} else {
					err = fmt.Errorf("%s is not a directory", comp)
				}
			}
			unix.Close(cur)
			if err != nil {
				return nil, err
			}
			cur = next
		}
	}
	return os.NewFile(uintptr(cur), r), nil
}
