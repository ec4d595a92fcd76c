package hostfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// cloneFile makes dst share src's blocks (FICLONE), where the file system
// can.
func cloneFile(dst, src *os.File) error {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
}

// copyFileRange copies n bytes from src at *roff to dst at *woff in the
// kernel (copy_file_range(2)).
func copyFileRange(src *os.File, roff *int64, dst *os.File, woff *int64, n int) (int, error) {
	return unix.CopyFileRange(int(src.Fd()), roff, int(dst.Fd()), woff, n, 0)
}
