//go:build unix && !linux

package local

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive flock(2) lock on f without waiting. Like
// Linux OFD locks, flock locks belong to the open file and are released
// when it is closed or the process dies.
func lockFile(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	default:
		return false, fmt.Errorf("flock on %s: %w", f.Name(), err)
	}
}

func unlockFile(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		return fmt.Errorf("flock(LOCK_UN) on %s: %w", f.Name(), err)
	}
	return nil
}
