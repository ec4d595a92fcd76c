//go:build linux && amd64

package local

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func vforkClone(flags uintptr) (pid uintptr, errno uintptr)

// forkProgram starts the command from the namespace's PID 1 with
// vfork semantics: the child shares this process's memory and runs on
// its stack until it executes the program, so nothing is copied. The
// parent must return at once (it uses only the results), as the child
// may have written over this frame's locals.
//
//go:nosplit
//go:norace
func forkProgram(a *spawnArgs) (uintptr, syscall.Errno) {
	pid, e := vforkClone(unix.CLONE_VM | unix.CLONE_VFORK | uintptr(unix.SIGCHLD))
	if pid != 0 || e != 0 {
		return pid, syscall.Errno(e)
	}
	runProgram(a)
	return 0, 0
}
