//go:build unix && !linux

package hostfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// cloneFile and copyFileRange are Linux's; elsewhere they report
// EOPNOTSUPP, which makes CopyTree read and write through its buffer.
func cloneFile(dst, src *os.File) error { return unix.EOPNOTSUPP }

func copyFileRange(src *os.File, roff *int64, dst *os.File, woff *int64, n int) (int, error) {
	return 0, unix.EOPNOTSUPP
}
