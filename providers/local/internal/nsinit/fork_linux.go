package nsinit

import (
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// forkProgram starts the command from the namespace's PID 1 with a plain
// fork (a copy of its memory).
//
//go:nosplit
//go:norace
func forkProgram(a *spawnArgs) (uintptr, syscall.Errno) {
	var pid uintptr
	var e syscall.Errno
	if runtime.GOARCH == "s390x" {
		pid, e = raw(unix.SYS_CLONE, 0, uintptr(unix.SIGCHLD), 0, 0, 0)
	} else {
		pid, e = raw(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0)
	}
	if pid != 0 || e != 0 {
		return pid, e
	}
	runProgram(a)
	return 0, 0
}

// cloneInit forks the PID 1 of a command's namespace (a copy of the
// init's memory), which runs nsInit.
//
//go:nosplit
//go:norace
func cloneInit(a *spawnArgs, flags uintptr) (uintptr, syscall.Errno) {
	var pid uintptr
	var e syscall.Errno
	if runtime.GOARCH == "s390x" {
		pid, e = raw(unix.SYS_CLONE, 0, flags, 0, 0, 0)
	} else {
		pid, e = raw(unix.SYS_CLONE, flags, 0, 0, 0, 0)
	}
	if pid != 0 || e != 0 {
		return pid, e
	}
	nsInit(a)
	return 0, 0
}
