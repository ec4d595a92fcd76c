//go:build !unix

package local

import (
	"errors"
	"os"
)

func lockFile(f *os.File) (bool, error) {
	return false, errors.New("state locking is not supported on this operating system")
}

func unlockFile(f *os.File) error { return nil }
