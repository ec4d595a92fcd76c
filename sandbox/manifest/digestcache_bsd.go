//go:build darwin || freebsd || netbsd || openbsd

package manifest

import "syscall"

// statTimes are a stat's modification and change times in nanoseconds.
func statTimes(st *syscall.Stat_t) (mtime, ctime int64) {
	return st.Mtimespec.Nano(), st.Ctimespec.Nano()
}
