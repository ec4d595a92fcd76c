//go:build unix

package hostfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/sandbox"
)

// Dir is a host directory used as a workspace root, with file operations
// that never leave it. Every path is workspace-relative (slash-separated,
// "" or "." for the root) and is resolved beneath the root by the kernel:
// openat2 with RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS where the kernel has
// it (Linux 5.6+), otherwise Go's os.Root, which walks the path one
// component at a time. A symlink inside the workspace that points out of
// it (absolute, or through "..") is refused with ErrPathEscape at the
// moment it is used; no string prefix test is involved.
//
// Its methods mirror the Sandbox file methods so providers whose
// workspace is a host directory can embed it. A Dir is safe for
// concurrent use.
type Dir struct {
	path    string
	root    *os.Root
	fd      int  // the root directory, for *at system calls
	openat2 bool // kernel supports openat2 RESOLVE_BENEATH
}

// OpenRoot opens dir, which must exist and be a directory, as a workspace
// root.
func OpenRoot(dir string) (*Dir, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace root: %w", err)
	}
	d := &Dir{path: dir, root: r, fd: -1}
	// Keep a directory fd of our own for the *at calls.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("open workspace root %s: %w", dir, err)
	}
	d.fd = fd
	d.openat2 = haveOpenat2(fd)
	return d, nil
}

// Resolver names the mechanism confining paths: "openat2" or "os.Root".
func (d *Dir) Resolver() string {
	if d.openat2 {
		return "openat2"
	}
	return "os.Root"
}

// Path is the host path of the root.
func (d *Dir) Path() string { return d.path }

// Close releases the root.
func (d *Dir) Close() error {
	err := d.root.Close()
	if d.fd >= 0 {
		if e := unix.Close(d.fd); err == nil {
			err = e
		}
		d.fd = -1
	}
	return err
}

// rel normalises a workspace-relative path for the kernel: "." for the
// root, and refuses lexical escapes before any system call.
func rel(p string) (string, error) {
	c, err := sandbox.CleanPath("", p)
	if err != nil {
		return "", err
	}
	return c, nil
}

// pathErr wraps a system error for workspace path p, translating the
// resolver's escape errors into ErrPathEscape.
func pathErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EXDEV) || errors.Is(err, sandbox.ErrPathEscape) ||
		strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%s %s: a symlink leads out of the workspace: %w", op, p, sandbox.ErrPathEscape)
	}
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%s %s: too many levels of symlinks or a magic link: %w", op, p, sandbox.ErrPathEscape)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: op, Path: p, Err: err}
}

// open opens rel beneath the root, following symlinks only while they
// stay inside it.
func (d *Dir) open(p string, flags int, perm uint32) (*os.File, error) {
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	if d.openat2 {
		for range 8 {
			fd, err := openBeneath(d.fd, r, flags, perm)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				return nil, err
			}
			return os.NewFile(uintptr(fd), path.Join(d.path, r)), nil
		}
		return nil, unix.EAGAIN
	}
	return d.root.OpenFile(r, flags, fs.FileMode(perm))
}

// openDir opens a directory beneath the root.
func (d *Dir) openDir(p string) (*os.File, error) {
	return d.open(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
}

// OpenDir opens directory p beneath the root, following symlinks only
// while they stay inside it: for checking a command's working directory.
func (d *Dir) OpenDir(p string) (*os.File, error) {
	f, err := d.openDir(p)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	return f, nil
}

// parent opens the directory holding p and returns it with p's last
// element. p must not be the root.
func (d *Dir) parent(p string) (*os.File, string, error) {
	r, err := rel(p)
	if err != nil {
		return nil, "", err
	}
	if r == "." {
		return nil, "", fmt.Errorf("the workspace root itself: %w", fs.ErrInvalid)
	}
	f, err := d.openDir(path.Dir(r))
	if err != nil {
		return nil, "", err
	}
	return f, path.Base(r), nil
}

// openRegular opens p beneath the root with flags and refuses, at once,
// anything but a regular file. Opening never blocks on what a command
// can create in the workspace: with O_NONBLOCK a FIFO opens immediately
// for reading, and fails with ENXIO for writing when nobody reads it (as
// a socket always does); fstat then refuses FIFOs, sockets and devices
// with ErrNotRegular before a byte is read or written.
func (d *Dir) openRegular(ctx context.Context, op, p string, flags int, perm uint32) (*os.File, error) {
	f, err := d.open(p, flags|unix.O_NONBLOCK|unix.O_NOCTTY, perm)
	if errors.Is(err, unix.ENXIO) {
		mode := fs.ModeIrregular
		if fi, serr := d.Stat(ctx, p); serr == nil && fi.Mode&fs.ModeSymlink == 0 {
			mode = fi.Mode
		}
		return nil, sandbox.NotRegularError(op, p, mode)
	}
	if err != nil {
		return nil, pathErr(op, p, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, pathErr(op, p, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, sandbox.NotRegularError(op, p, st.Mode())
	}
	return f, nil
}

// ReadFile reads at most limit bytes of a file (limit <= 0: no limit)
// and fails when the file is larger. FIFOs, sockets and devices are
// refused with ErrNotRegular without blocking.
func (d *Dir) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	f, err := d.openRegular(ctx, "read", p, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, pathErr("read", p, err)
	}
	if limit > 0 && st.Size() > limit {
		return nil, pathErr("read", p, fmt.Errorf("file is %d bytes, more than the limit of %d", st.Size(), limit))
	}
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, pathErr("read", p, err)
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, pathErr("read", p, fmt.Errorf("file grew past the limit of %d bytes", limit))
	}
	return b, nil
}

// WriteFile writes data to a file, creating parent directories as
// needed. An existing file is truncated; a symlink is followed only while
// it stays inside the workspace. An existing FIFO, socket or device is
// refused with ErrNotRegular without blocking.
func (d *Dir) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	if mode == 0 {
		mode = 0o644
	}
	r, err := rel(p)
	if err != nil {
		return err
	}
	if r == "." {
		return pathErr("write", p, fs.ErrInvalid)
	}
	if err := d.Mkdir(ctx, path.Dir(r)); err != nil {
		return err
	}
	// O_TRUNC only takes effect on a regular file, so a special file is
	// left as it was.
	f, err := d.openRegular(ctx, "write", r, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, uint32(mode.Perm()))
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return pathErr("write", p, err)
	}
	return pathErr("write", p, f.Close())
}

// Remove removes a file, a symlink (not its target) or an empty directory.
func (d *Dir) Remove(ctx context.Context, p string) error {
	pf, name, err := d.parent(p)
	if err != nil {
		return pathErr("remove", p, err)
	}
	defer pf.Close()
	err = unix.Unlinkat(int(pf.Fd()), name, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(int(pf.Fd()), name, unix.AT_REMOVEDIR)
	}
	return pathErr("remove", p, err)
}

// Mkdir creates a directory and its parents (mode 0755). An existing
// directory, or a symlink to one inside the workspace, is fine.
func (d *Dir) Mkdir(ctx context.Context, p string) error {
	r, err := rel(p)
	if err != nil {
		return err
	}
	return pathErr("mkdir", p, d.mkdirAll(r, 0))
}

func (d *Dir) mkdirAll(r string, depth int) error {
	if r == "." {
		return nil
	}
	f, err := d.openDir(r)
	if err == nil {
		return f.Close()
	}
	if !errors.Is(err, unix.ENOENT) {
		return err
	}
	if depth > 4096 {
		return unix.ELOOP
	}
	if err := d.mkdirAll(path.Dir(r), depth+1); err != nil {
		return err
	}
	pf, name, err := d.parent(r)
	if err != nil {
		return err
	}
	defer pf.Close()
	err = unix.Mkdirat(int(pf.Fd()), name, 0o755)
	if err == unix.EEXIST {
		// Lost a race, or a symlink/file is there: check it is a directory.
		f, err := d.openDir(r)
		if err != nil {
			return err
		}
		return f.Close()
	}
	return err
}

// Stat describes p without following a final symlink.
func (d *Dir) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	r, err := rel(p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if r == "." {
		f, err := d.openDir(".")
		if err != nil {
			return sandbox.FileInfo{}, pathErr("stat", p, err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return sandbox.FileInfo{}, pathErr("stat", p, err)
		}
		return sandbox.FileInfo{Path: ".", Mode: st.Mode(), Size: st.Size(), ModTime: st.ModTime()}, nil
	}
	pf, name, err := d.parent(r)
	if err != nil {
		return sandbox.FileInfo{}, pathErr("stat", p, err)
	}
	defer pf.Close()
	fi, err := statAt(int(pf.Fd()), name, r)
	return fi, pathErr("stat", p, err)
}

// statAt lstat()s name in directory dirfd and describes it as path r.
func statAt(dirfd int, name, r string) (sandbox.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return sandbox.FileInfo{}, err
	}
	fi := sandbox.FileInfo{
		Path:    r,
		Size:    st.Size,
		Mode:    sandbox.FileModeOf(uint32(st.Mode)),
		ModTime: time.Unix(st.Mtim.Unix()),
	}
	if fi.Mode&fs.ModeSymlink != 0 {
		t, err := readlinkAt(dirfd, name)
		if err != nil {
			return sandbox.FileInfo{}, err
		}
		fi.Target = t
	}
	return fi, nil
}

func readlinkAt(dirfd int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		k, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if k < n {
			return string(buf[:k]), nil
		}
		if n > 1<<16 {
			return "", unix.ENAMETOOLONG
		}
	}
}

// ReadDir lists a directory, sorted by name, without following symlinks
// in the entries.
func (d *Dir) ReadDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	f, err := d.openDir(r)
	if err != nil {
		return nil, pathErr("readdir", p, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, pathErr("readdir", p, err)
	}
	slices.Sort(names)
	out := make([]sandbox.FileInfo, 0, len(names))
	for _, n := range names {
		fi, err := statAt(int(f.Fd()), n, relJoin(r, n))
		if errors.Is(err, unix.ENOENT) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, pathErr("readdir", relJoin(r, n), err)
		}
		out = append(out, fi)
	}
	return out, nil
}

// Symlink creates a symlink at p pointing to target. The target must be
// relative and stay inside the workspace.
func (d *Dir) Symlink(ctx context.Context, target, p string) error {
	r, err := rel(p)
	if err != nil {
		return err
	}
	if !symlinkStaysInside(r, target) {
		return fmt.Errorf("symlink %s -> %s: target leaves the workspace: %w", p, target, sandbox.ErrPathEscape)
	}
	pf, name, err := d.parent(r)
	if err != nil {
		return pathErr("symlink", p, err)
	}
	defer pf.Close()
	return pathErr("symlink", p, unix.Symlinkat(target, int(pf.Fd()), name))
}

// CopyIn extracts a tar stream into directory dir (created if missing)
// with the rules of Extract and the default limits, keeping the members'
// permission bits as every provider's CopyIn does (a snapshot restores
// a 0600 file as 0600).
func (d *Dir) CopyIn(ctx context.Context, dir string, tr io.Reader) error {
	return ExtractWith(ctx, d, dir, tr, ExtractOptions{KeepPermissions: true})
}

// CopyOut streams a tar of dir; member names are relative to dir.
func (d *Dir) CopyOut(ctx context.Context, dir string) (io.ReadCloser, error) {
	r, err := rel(dir)
	if err != nil {
		return nil, err
	}
	f, err := d.openDir(r)
	if err != nil {
		return nil, pathErr("copy out", dir, err)
	}
	f.Close()
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(Archive(ctx, d, r, pw, ArchiveOptions{}))
	}()
	return pr, nil
}
