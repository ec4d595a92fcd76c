package hostfs

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// killGroupOnExit waits for the group leader pid to exit, without reaping
// it, then kills the rest of its process group at once (RunProcess kills
// it again once the output is drained, which can take longer).
func killGroupOnExit(pid int) {
	var info unix.Siginfo
	for {
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			break
		}
	}
	// Even when the leader was reaped first, its group id cannot be reused
	// while any member lives.
	syscall.Kill(-pid, syscall.SIGKILL)
}
