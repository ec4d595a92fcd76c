package hostfs

import "golang.org/x/sys/unix"

const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// haveOpenat2 probes the running kernel for openat2 with RESOLVE_BENEATH
// (Linux 5.6+; seccomp profiles may also refuse it).
func haveOpenat2(dirfd int) bool {
	fd, err := openBeneath(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// openBeneath opens p relative to dirfd, refusing (EXDEV) any resolution
// that leaves dirfd, including through absolute or ".." symlinks, and
// magic links such as /proc/self/fd/N (ELOOP).
func openBeneath(dirfd int, p string, flags int, perm uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolveBeneath}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		how.Mode = uint64(perm)
	}
	return unix.Openat2(dirfd, p, &how)
}
