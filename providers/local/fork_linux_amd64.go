//go:build linux && amd64

package local

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func vforkClone(flags uintptr) (pid uintptr, errno uintptr)

func cloneVM(flags, stack uintptr, a *spawnArgs) (pid uintptr, errno uintptr)

// childStack is the size of the stack the namespace's PID 1 runs on.
const childStack = 64 << 10

// cloneInit starts the PID 1 of a command's namespace sharing this
// process's memory (CLONE_VM): nothing is copied, so the cost does not
// grow with the init's memory, and the init's own pages are not made
// copy-on-write. The child runs nsInit on a stack of its own (a.stack)
// and touches nothing else but a; both stay allocated until it is reaped.
//
//go:nosplit
//go:norace
func cloneInit(a *spawnArgs, flags uintptr) (uintptr, syscall.Errno) {
	pid, e := cloneVM(flags|unix.CLONE_VM, a.stack, a)
	return pid, syscall.Errno(e)
}

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
