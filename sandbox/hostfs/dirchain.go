//go:build unix

package hostfs

import (
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// maxOpenDirs is how many directories of one walk's chain dirChain keeps
// open at most, however deep the tree.
const maxOpenDirs = 64

// dirChain is the chain of directories a depth-first walk is in, from
// the walk's top down to the directory being walked, with at most
// maxOpenDirs of them open: a tree 30,000 directories deep must not need
// 30,000 file descriptors. A directory closed on the way down is opened
// again when the walk comes back up to it, as ".." of its child, and
// must still be the directory it was (same device and inode); if it is
// not (the child was moved meanwhile), it is opened by name from the top
// of the chain, each level checked the same way, or the walk fails rather
// than continue somewhere else. Names are opened with O_NOFOLLOW, so the
// chain never passes through a symlink.
type dirChain struct {
	levels []dirLevel
	open   int
	// lo is the shallowest open level below the top: the open levels are
	// the top and lo..len(levels)-1.
	lo int
}

type dirLevel struct {
	name     string // in the parent; "" for the top
	fd       int    // -1 while closed
	dev, ino uint64
	owned    bool // the chain closes it
	// st is the directory's status when the chain entered it.
	st unix.Stat_t
}

// newDirChain starts a chain at the open directory top, which stays
// open and owned by the caller.
func newDirChain(top int) (*dirChain, error) {
	var st unix.Stat_t
	if err := unix.Fstat(top, &st); err != nil {
		return nil, err
	}
	return &dirChain{levels: []dirLevel{{fd: top, dev: uint64(st.Dev), ino: uint64(st.Ino), st: st}}, open: 1, lo: 1}, nil
}

// depth is the number of directories entered below the top.
func (c *dirChain) depth() int { return len(c.levels) - 1 }

// push enters directory name of the current directory.
func (c *dirChain) push(name string) error {
	parent, err := c.fd()
	if err != nil {
		return err
	}
	fd, err := openDirNoFollow(parent, name)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	c.levels = append(c.levels, dirLevel{name: name, fd: fd, dev: uint64(st.Dev), ino: uint64(st.Ino), owned: true, st: st})
	c.open++
	c.trim()
	return nil
}

// pop leaves the current directory for its parent, opening the parent
// again as ".." if it was closed.
func (c *dirChain) pop() {
	last := len(c.levels) - 1
	l := c.levels[last]
	if parent := &c.levels[last-1]; parent.fd < 0 && l.fd >= 0 {
		if fd, err := openDirNoFollow(l.fd, ".."); err == nil {
			if sameDir(fd, parent) {
				parent.fd = fd
				c.open++
				c.lo = last - 1
			} else {
				unix.Close(fd)
			}
		}
	}
	if l.owned && l.fd >= 0 {
		unix.Close(l.fd)
		c.open--
	}
	c.levels = c.levels[:last]
	c.lo = min(c.lo, last)
}

// sameDir reports whether fd is the directory l was.
func sameDir(fd int, l *dirLevel) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && uint64(st.Dev) == l.dev && uint64(st.Ino) == l.ino
}

// fd returns the current directory, opening it again (and the closed
// directories above it) if it was closed on the way down.
func (c *dirChain) fd() (int, error) {
	last := len(c.levels) - 1
	if c.levels[last].fd >= 0 {
		return c.levels[last].fd, nil
	}
	// Only the top is open: walk down again by name.
	for i := 1; i <= last; i++ {
		l := &c.levels[i]
		if l.fd >= 0 {
			continue
		}
		fd, err := openDirNoFollow(c.levels[i-1].fd, l.name)
		if err != nil {
			return -1, fmt.Errorf("reopening %s: %w", l.name, err)
		}
		if !sameDir(fd, l) {
			unix.Close(fd)
			return -1, fmt.Errorf("directory %s was replaced during the walk", l.name)
		}
		l.fd = fd
		c.open++
		c.lo = min(c.lo, i)
		c.trim()
	}
	return c.levels[last].fd, nil
}

// trim closes the shallowest open directories below the top until at
// most maxOpenDirs are open. The deepest one is never closed.
func (c *dirChain) trim() {
	for c.open > maxOpenDirs && c.lo < len(c.levels)-1 {
		if l := &c.levels[c.lo]; l.fd >= 0 && l.owned {
			unix.Close(l.fd)
			l.fd = -1
			c.open--
		}
		c.lo++
	}
}

// close closes every directory the chain opened.
func (c *dirChain) close() {
	for len(c.levels) > 1 {
		c.pop()
	}
}

// openDirNoFollow opens directory name of dirfd without following a
// symlink.
func openDirNoFollow(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// readDirEntries lists directory dirfd (unsorted, with the types the
// directory records) through a descriptor of its own.
func readDirEntries(dirfd int) ([]fs.DirEntry, error) {
	fd, err := openDirNoFollow(dirfd, ".")
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	return f.ReadDir(-1)
}
