//go:build unix && !linux

package hostfs

import "golang.org/x/sys/unix"

// cloneFile and copyFileRange are Linux's; elsewhere they report
// EOPNOTSUPP, which makes CopyTree read and write through its buffer.
func cloneFile(dst, src int) error { return unix.EOPNOTSUPP }

func copyFileRange(src int, roff *int64, dst int, woff *int64, n int) (int, error) {
	return 0, unix.EOPNOTSUPP
}

// setTimes sets the access and modification times of the open file fd.
func setTimes(fd int, ts *[2]unix.Timespec) error {
	return unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(ts[0].Nano()), unix.NsecToTimeval(ts[1].Nano())})
}
