//go:build unix

package sandbox

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
	"time"

	"golang.org/x/sys/unix"
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
}

// ErrSpecialFile is returned (wrapped) by a strict Archive for a symlink
// or special file.
var ErrSpecialFile = errors.New("not a regular file or directory")

// Archive writes a tar stream of directory dir of d to w: directories,
// regular files and symlinks, sorted by name, depth first, member names
// relative to dir, no owners, modification times to the second. The walk
// never follows symlinks. A file that changes size while it is read is
// an error.
func Archive(ctx context.Context, d *Dir, dir string, w io.Writer, opts ArchiveOptions) error {
	r, err := rel(dir)
	if err != nil {
		return err
	}
	f, err := d.openDir(r)
	if err != nil {
		return pathErr("archive", dir, err)
	}
	a := archiver{ctx: ctx, tw: tar.NewWriter(w), opts: opts, buf: make([]byte, 256<<10), top: r}
	err = a.walk(f, "")
	f.Close()
	if err != nil {
		return err
	}
	return a.tw.Close()
}

type archiver struct {
	ctx  context.Context
	tw   *tar.Writer
	opts ArchiveOptions
	buf  []byte
	top  string
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

// walk archives the entries of directory f, whose path relative to the
// archived directory is prefix ("" for the top).
func (a *archiver) walk(f *os.File, prefix string) error {
	names, err := f.Readdirnames(-1)
	if err != nil {
		return pathErr("archive", relJoin(a.top, prefix), err)
	}
	slices.Sort(names)
	dirfd := int(f.Fd())
	for _, n := range names {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		name := n
		if prefix != "" {
			name = prefix + "/" + n
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue
			}
			return pathErr("archive", relJoin(a.top, name), err)
		}
		mode := unixMode(uint32(st.Mode))
		isDir := mode.IsDir()
		if a.opts.Exclude != nil && a.opts.Exclude(name, isDir) {
			continue
		}
		mtime := time.Unix(st.Mtim.Sec, 0)
		switch {
		case isDir:
			if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(mode.Perm()), ModTime: mtime}); err != nil {
				return err
			}
			a.digest("d", name)
			fd, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return pathErr("archive", relJoin(a.top, name), err)
			}
			sub := os.NewFile(uintptr(fd), name)
			err = a.walk(sub, name)
			sub.Close()
			if err != nil {
				return err
			}
		case mode.IsRegular():
			if err := a.file(dirfd, n, name, mode, mtime); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			if a.opts.Strict {
				return fmt.Errorf("%s is a symlink: %w", relJoin(a.top, name), ErrSpecialFile)
			}
			target, err := readlinkAt(dirfd, n)
			if err != nil {
				return pathErr("archive", relJoin(a.top, name), err)
			}
			if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: mtime}); err != nil {
				return err
			}
			a.digest("l", name, target)
		default:
			if a.opts.Strict {
				return fmt.Errorf("%s is a %s: %w", relJoin(a.top, name), mode.Type(), ErrSpecialFile)
			}
		}
	}
	return nil
}

func (a *archiver) file(dirfd int, n, name string, mode fs.FileMode, mtime time.Time) error {
	fd, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("archive", relJoin(a.top, name), err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr("archive", relJoin(a.top, name), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s changed type while archiving: %w", relJoin(a.top, name), ErrSpecialFile)
	}
	if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(mode.Perm()), Size: st.Size, ModTime: mtime}); err != nil {
		return err
	}
	var dst io.Writer = a.tw
	if a.opts.Digest != nil {
		a.digest("f", name, strconv.FormatUint(uint64(sanitizeMode(int64(mode.Perm()))), 8), strconv.FormatInt(st.Size, 10))
		dst = io.MultiWriter(a.tw, a.opts.Digest)
	}
	k, err := io.CopyBuffer(onlyWriter{dst}, io.LimitReader(f, st.Size), a.buf)
	if err != nil {
		return pathErr("archive", relJoin(a.top, name), err)
	}
	if k != st.Size {
		return fmt.Errorf("archive %s: file shrank from %d to %d bytes while being read", relJoin(a.top, name), st.Size, k)
	}
	return nil
}
