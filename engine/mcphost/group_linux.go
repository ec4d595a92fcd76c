package mcphost

import (
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// startInGroup starts cmd in a process group of its own, killed (SIGKILL)
// by the kernel when agentctl dies. It returns once cmd runs; done gets
// cmd's Wait error once cmd exited and its group was killed.
func startInGroup(cmd *exec.Cmd, done func(error)) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		// PR_SET_PDEATHSIG fires when the thread that started the process
		// exits, not agentctl: this goroutine keeps its thread, locked,
		// for as long as the server lives, and the thread ends with it.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		pid := cmd.Process.Pid
		// Kill the group while its leader is not yet reaped, so its id
		// cannot have been reused.
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		killGroup(pid)
		done(cmd.Wait())
	}()
	return <-started
}

// exitedNow reports whether the child pid has exited, reaped or not,
// without waiting.
func exitedNow(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	// Signo stays 0 while the child runs; ECHILD: already reaped.
	return err == unix.ECHILD || err == nil && info.Signo != 0
}
