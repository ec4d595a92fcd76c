package nsinit

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openMounts opens each storage mount's host directory (a path
// descriptor), before the staging root hides the host's /tmp.
func openMounts(ms []Mount) ([]int, error) {
	fds := make([]int, 0, len(ms))
	for _, m := range ms {
		fd, err := unix.Open(m.HostDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("opening the storage mount %s: %w", m.HostDir, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// bindMounts mounts each storage mount at its target under the
// workspace (nosuid, nodev; read-only when asked): a received clone is
// moved there, a path descriptor bound.
func bindMounts(isMount bool, ms []Mount, fds []int, nr func(string) string) error {
	for i, m := range ms {
		dst := nr(m.Target)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("making the mount point %s: %w", m.Target, err)
		}
		if isMount {
			// A detached clone of the host's mount, from the parent.
			if err := unix.MoveMount(fds[i], "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("mounting the storage mount at %s: %w", m.Target, err)
			}
		} else if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fds[i]), dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding the storage mount at %s: %w", m.Target, err)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if m.ReadOnly {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, dst, 0, &attr); err != nil {
			return fmt.Errorf("restricting the storage mount at %s: %w", m.Target, err)
		}
	}
	return nil
}
