//go:build linux

package local

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive open file description lock on f without
// waiting. It reports false when another open file holds it.
func lockFile(f *os.File) (bool, error) {
	flk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &flk)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
		return false, nil
	default:
		return false, fmt.Errorf("fcntl(F_OFD_SETLK) on %s: %w", f.Name(), err)
	}
}

func unlockFile(f *os.File) error {
	flk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &flk); err != nil {
		return fmt.Errorf("fcntl(F_OFD_SETLK, F_UNLCK) on %s: %w", f.Name(), err)
	}
	return nil
}
