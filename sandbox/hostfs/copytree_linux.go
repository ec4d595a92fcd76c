package hostfs

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// cloneFile makes dst share src's blocks (FICLONE), where the file system
// can.
func cloneFile(dst, src int) error {
	return unix.IoctlFileClone(dst, src)
}

// copyFileRange copies n bytes from src at *roff to dst at *woff in the
// kernel (copy_file_range(2)).
func copyFileRange(src int, roff *int64, dst int, woff *int64, n int) (int, error) {
	return unix.CopyFileRange(src, roff, dst, woff, n, 0)
}

// setTimes sets the access and modification times of the open file fd
// (utimensat(2) with a NULL path, as futimens(3) does).
func setTimes(fd int, ts *[2]unix.Timespec) error {
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
