//go:build unix

package hostfs

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// kernelCopier copies file content in the kernel where the file systems
// allow it, through a buffer where they do not, and completes files on a
// worker goroutine (send) while its owner goes on.
type kernelCopier struct {
	// noClone and noCopyRange are set once the file system has refused
	// FICLONE or copy_file_range: the rest of the files do not try again
	// (the zero kernelCopier tries both).
	noClone, noCopyRange atomic.Bool
	worker               *copyWorker
}

// copyJob is content the worker copies: size bytes of src from offset
// from into dst at offset at (name is what its errors call it). finish,
// when set, completes dst once the content is there (err nil) or
// releases it (err: why the content is not there) and returns the job's
// error; src is the job's to close unless keepSrc. done, when set, is
// told the outcome once the job is over (errAbandoned for a job dropped
// undone).
type copyJob struct {
	name           string
	dst, src       fdFile
	at, from, size int64
	keepSrc        bool
	finish         func(err error) error
	done           func(error)
}

// fileFinish completes a file a tree copy or an extraction created, once
// its content is copied: its mode perm and, unless ts is nil, its times
// ts; it closes the file either way.
func fileFinish(dst fdFile, perm uint32, ts *[2]unix.Timespec) func(error) error {
	return func(err error) error {
		if err == nil {
			err = pathErr("write", dst.name, setModeTimes(dst.fd, perm, ts))
		}
		if cerr := dst.Close(); err == nil {
			err = pathErr("write", dst.name, cerr)
		}
		return err
	}
}

// setModeTimes sets the mode perm and, unless ts is nil, the access and
// modification times ts of the open file fd.
func setModeTimes(fd int, perm uint32, ts *[2]unix.Timespec) error {
	if err := unix.Fchmod(fd, perm); err != nil {
		return err
	}
	if ts != nil {
		return setTimes(fd, ts)
	}
	return nil
}

// errAbandoned is what a copyJob's done is told when the job was closed
// undone (an earlier job failed, or its owner stopped).
var errAbandoned = errors.New("not copied: the copy stopped before this file")

// copyWorker completes copyJobs in the order sent, on a goroutine of its
// own.
type copyWorker struct {
	jobs chan copyJob
	done chan struct{}
	// failed is set with err, the first job's error; stop once the walk
	// failed: the jobs left are closed undone.
	failed, stop atomic.Bool
	err          error // readable once done is closed, or failed set
	mu           sync.Mutex
}

// copyQueue is how many files may wait for the worker (two descriptors
// each).
const copyQueue = 16

// send hands job to the worker, starting it with the first job. It
// returns the worker's error once a job failed (the job is then dropped
// undone), so the walk stops at the next file.
func (c *kernelCopier) send(job copyJob) error {
	if c.worker == nil {
		c.worker = &copyWorker{jobs: make(chan copyJob, copyQueue), done: make(chan struct{})}
		go c.worker.run(c)
	}
	if c.worker.failed.Load() {
		job.run(c, nil, true)
		c.worker.mu.Lock()
		defer c.worker.mu.Unlock()
		return c.worker.err
	}
	c.worker.jobs <- job
	return nil
}

// finish waits until the worker has completed every job sent (dropping
// them undone when abandon is set: the walk failed) and returns the
// first job's error.
func (c *kernelCopier) finish(abandon bool) error {
	w := c.worker
	if w == nil {
		return nil
	}
	w.stop.Store(abandon)
	close(w.jobs)
	<-w.done
	return w.err
}

func (w *copyWorker) run(c *kernelCopier) {
	defer close(w.done)
	var buf []byte
	for job := range w.jobs {
		abandon := w.failed.Load() || w.stop.Load()
		if buf == nil && !abandon {
			buf = make([]byte, 256<<10)
		}
		if err := job.run(c, buf, abandon); err != nil && !abandon {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			w.failed.Store(true)
		}
	}
}

// run copies the job's content in the kernel (through buf where it
// cannot), unless abandon, then finishes the job: finish, src closed,
// done told.
func (j copyJob) run(c *kernelCopier, buf []byte, abandon bool) error {
	var err error
	if abandon {
		err = errAbandoned
	} else if err = c.copyData(j.dst, j.src, j.at, j.from, j.size, nil, buf); err != nil {
		err = fmt.Errorf("copy %s: %w", j.name, err)
	}
	if j.finish != nil {
		if ferr := j.finish(err); err == nil {
			err = ferr
		}
	}
	if !j.keepSrc {
		j.src.Close()
	}
	if j.done != nil {
		j.done(err)
	}
	return err
}

// copyData copies size bytes of src from offset from (the whole file
// the walk measured, from 0; a member's content in a snapshot) into dst
// at offset at (0: an empty file; a file's content in a snapshot),
// feeding digest with them.
func (c *kernelCopier) copyData(dst, src fdFile, at, from, size int64, digest io.Writer, buf []byte) error {
	if size == 0 {
		return nil
	}
	var off int64
	if digest == nil && at == 0 && from == 0 && !c.noClone.Load() {
		err := cloneFile(dst.fd, src.fd)
		if err == nil {
			// The clone is of the whole file: it may have changed size
			// since it was measured.
			var st unix.Stat_t
			if err := unix.Fstat(dst.fd, &st); err != nil {
				return err
			}
			if st.Size == size {
				return nil
			}
			if err := unix.Ftruncate(dst.fd, 0); err != nil {
				return err
			}
		} else if kernelCopyUnsupported(err) {
			c.noClone.Store(true)
		} else {
			return fmt.Errorf("clone: %w", err)
		}
	}
	if digest == nil && !c.noCopyRange.Load() {
		var err error
		if off, err = kernelCopy(dst.fd, src.fd, at, from, size); err != nil {
			if !kernelCopyUnsupported(err) {
				return fmt.Errorf("copy_file_range: %w", err)
			}
			c.noCopyRange.Store(true)
		}
	}
	for off < size {
		k, err := src.ReadAt(buf[:min(int64(len(buf)), size-off)], from+off)
		if k > 0 {
			if digest != nil {
				digest.Write(buf[:k])
			}
			if _, werr := dst.WriteAt(buf[:k], at+off); werr != nil {
				return werr
			}
			off += int64(k)
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: it shrank from %d to %d bytes while being read", ErrChangedWhileCopied, from+size, from+off)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// kernelCopy copies size bytes of src from offset from to dst at offset
// at with copy_file_range, until the kernel copies nothing more (the end
// of the file, or a file system that copies nothing: some report 0
// instead of an error) or fails. It returns how many bytes it copied and
// the error that stopped it; the caller copies the rest, if any, through
// a buffer.
func kernelCopy(dst, src int, at, from, size int64) (int64, error) {
	var off int64
	for off < size {
		roff, woff := from+off, at+off
		k, err := copyFileRange(src, &roff, dst, &woff, int(min(size-off, 1<<30)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return off, err
		}
		if k == 0 {
			break
		}
		off += int64(k)
	}
	return off, nil
}

// kernelCopyUnsupported reports whether an error from FICLONE or
// copy_file_range means the file systems (or the kernel) cannot do it,
// rather than that the copy failed.
func kernelCopyUnsupported(err error) bool {
	switch err {
	case unix.ENOSYS, unix.EXDEV, unix.EOPNOTSUPP, unix.EINVAL, unix.ENOTTY, unix.EPERM, unix.EBADF:
		return true
	}
	return false
}
