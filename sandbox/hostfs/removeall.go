//go:build unix

package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// RemoveAll removes path and everything below it, as os.RemoveAll does,
// but with a bounded number of open directories however deep the tree
// (os.RemoveAll holds one per level and fails with EMFILE on a tree tens
// of thousands of directories deep, leaving it behind). Directories a
// command left without read, write or search permission are made
// accessible first. Symlinks are removed, never followed. A missing path
// is not an error.
func RemoveAll(path string) error {
	if path == "" {
		return nil
	}
	parent, base := filepath.Dir(path), filepath.Base(path)
	if base == "." || base == ".." || base == "/" {
		return fmt.Errorf("remove %s: refusing to remove %q", path, base)
	}
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &fs.PathError{Op: "remove", Path: path, Err: err}
	}
	defer unix.Close(pfd)
	if err := removeAt(pfd, base); err != nil {
		return &fs.PathError{Op: "remove", Path: path, Err: err}
	}
	return nil
}

// removeAt removes entry name of directory dirfd and, for a directory,
// its contents, walking down with a dirChain.
func removeAt(dirfd int, name string) error {
	err := unlinkEntry(dirfd, name)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return err
	}
	fd, err := openDirForRemoval(dirfd, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	c, err := newDirChain(fd)
	if err != nil {
		return err
	}
	defer c.close()
	// pending[i] are the entries of level i not yet removed: each
	// directory is listed once.
	var pending [][]fs.DirEntry
	for {
		cur, err := c.fd()
		if err != nil {
			return err
		}
		if len(pending) < len(c.levels) {
			ents, err := readDirEntries(cur)
			if err != nil {
				return err
			}
			pending = append(pending, ents)
		}
		top := len(pending) - 1
		rest, sub, err := removeEntries(cur, pending[top])
		if err != nil {
			return err
		}
		pending[top] = rest
		if sub != "" {
			err := c.push(sub)
			if errors.Is(err, unix.EACCES) && unix.Fchmodat(cur, sub, 0o700, 0) == nil {
				// A directory left without read or search permission.
				err = c.push(sub)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", sub, err)
			}
			continue
		}
		// The current directory is empty now; a command may have added
		// entries meanwhile, which rmdir finds.
		if c.depth() == 0 {
			break
		}
		done := c.levels[len(c.levels)-1].name
		c.pop()
		pending = pending[:top]
		up, err := c.fd()
		if err != nil {
			return err
		}
		if err := unix.Unlinkat(up, done, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s: %w", done, err)
		}
	}
	c.close()
	return unlinkEntry(dirfd, name)
}

// removeEntries removes the entries ents of directory dirfd until it
// meets a directory that is not empty: it returns the entries after that
// one and its name ("" when all are gone).
func removeEntries(dirfd int, ents []fs.DirEntry) ([]fs.DirEntry, string, error) {
	for i, e := range ents {
		n := e.Name()
		remove := func() error {
			if e.IsDir() {
				return unix.Unlinkat(dirfd, n, unix.AT_REMOVEDIR)
			}
			return unlinkEntry(dirfd, n)
		}
		err := remove()
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			// No write permission on the directory.
			if unix.Fchmod(dirfd, 0o700) == nil {
				err = remove()
			}
		}
		switch {
		case err == nil || errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST):
			return ents[i+1:], n, nil
		default:
			return nil, "", fmt.Errorf("%s: %w", n, err)
		}
	}
	return nil, "", nil
}

// unlinkEntry removes a file, symlink or empty directory.
func unlinkEntry(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		// EPERM: Linux's answer to unlink(2) on a directory.
		if e := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); !errors.Is(e, unix.ENOTDIR) {
			err = e
		}
	}
	return err
}

// openDirForRemoval opens directory name of dirfd without following a
// symlink, making it readable and searchable first when it is not.
func openDirForRemoval(dirfd int, name string) (int, error) {
	fd, err := openDirNoFollow(dirfd, name)
	if errors.Is(err, unix.EACCES) {
		if unix.Fchmodat(dirfd, name, 0o700, 0) == nil {
			fd, err = openDirNoFollow(dirfd, name)
		}
	}
	return fd, err
}
