//go:build unix

package hostfs

import (
	"io"
	"io/fs"

	"golang.org/x/sys/unix"
)

// fdFile is an open regular file read or written with plain system
// calls, without an *os.File. Archive and Extract open one per member,
// thousands per tree, and os.NewFile costs each a fcntl (is the
// descriptor non-blocking?) and, for one opened O_NONBLOCK as Archive
// opens them, an epoll_ctl that fails (a regular file cannot be polled):
// two system calls per file that reading or writing it whole does not
// need. A FileDigest's file is one too (read with pread off the copying
// goroutine). Errors are *fs.PathError naming the file, as an *os.File's
// are.
type fdFile struct {
	fd   int
	name string
}

func (f fdFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := unix.Pread(f.fd, p, off)
	if err != nil {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (f fdFile) WriteAt(p []byte, off int64) (int, error) {
	return f.writeAll(p, func(b []byte, done int) (int, error) { return unix.Pwrite(f.fd, b, off+int64(done)) })
}

func (f fdFile) Name() string { return f.name }

func (f fdFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(f.fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f fdFile) Write(p []byte) (int, error) {
	return f.writeAll(p, func(b []byte, _ int) (int, error) { return unix.Write(f.fd, b) })
}

// writeAll writes all of p with write (given what is left and how much
// is written), again after an interruption or a short write.
func (f fdFile) writeAll(p []byte, write func(b []byte, done int) (int, error)) (int, error) {
	written := 0
	for written < len(p) {
		n, err := write(p[written:], written)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return written, &fs.PathError{Op: "write", Path: f.name, Err: err}
		}
		written += n
	}
	return written, nil
}

// Close closes the descriptor; a second Close is an error, as for
// *os.File, so close it once.
func (f fdFile) Close() error {
	if err := unix.Close(f.fd); err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}
