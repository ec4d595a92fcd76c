package archive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// createSnapshotTemp opens the file a snapshot of base is written to in
// dir: an unnamed O_TMPFILE file, which the kernel frees if the process
// dies before commit links it, or, where the filesystem or /proc does not
// allow that, a named temporary file.
func createSnapshotTemp(dir, base string) (*snapshotTemp, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err == nil {
		// Linking it needs /proc/self/fd (without CAP_DAC_READ_SEARCH).
		if _, serr := os.Stat(procFD(fd)); serr == nil {
			return &snapshotTemp{f: os.NewFile(uintptr(fd), filepath.Join(dir, "."+base+" (unnamed)")), dir: dir, base: base}, nil
		}
		unix.Close(fd)
	}
	f, err := os.OpenFile(tempName(dir, base), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &snapshotTemp{f: f, name: f.Name(), dir: dir, base: base}, nil
}

func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// linkTemp gives the unnamed file f a temporary name in dir and returns
// it.
func linkTemp(f *os.File, dir, base string) (string, error) {
	for range 8 {
		name := tempName(dir, base)
		err := unix.Linkat(unix.AT_FDCWD, procFD(int(f.Fd())), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("linking the snapshot into %s: %w", dir, err)
		}
	}
	return "", fmt.Errorf("linking the snapshot into %s: %w", dir, unix.EEXIST)
}
