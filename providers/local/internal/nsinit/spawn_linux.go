//go:build linux

package nsinit

// Starting one command from the sandbox's long-lived init without
// executing a helper binary. The init forks (a raw clone) a child that is
// PID 1 of a new PID namespace, in a private copy of the init's mount
// namespace; that child mounts a /proc of its own and forks the command,
// which drops every privilege and executes the program. The child then
// reaps every process of its namespace until the command exits, and exits
// with the command's status: the kernel then kills whatever the command
// left behind, and a SIGKILL to the child (timeout, cancellation) kills
// the command's whole tree, fork bombs included.
//
// Between the clone and the execve only raw system calls run, in
// //go:nosplit functions that neither allocate nor write pointers, on
// memory prepared before the clone; signals stay blocked until the
// program's handlers have been reset. This is the discipline of the Go
// runtime's own fork/exec (syscall.forkAndExecInChild), which cannot be
// used here because it has no step that mounts a file system in between.

import (
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Steps of the child's setup, reported with the errno when one fails.
const (
	stepDup = iota + 1
	stepProc
	stepFork
	stepSetsid
	stepRlimit
	stepKeyring
	stepCaps
	stepChdir
	stepSignals
	stepExec
	stepCtty
	stepIDs
)

var stepNames = map[uint32]string{
	stepDup: "arranging descriptors", stepProc: "mounting /proc", stepFork: "forking the command",
	stepSetsid: "creating a session", stepRlimit: "limiting processes", stepKeyring: "joining a new session keyring",
	stepCaps: "dropping capabilities", stepChdir: "changing to the working directory",
	stepSignals: "resetting signal handlers", stepExec: "executing the program",
	stepCtty: "taking the terminal as the controlling terminal",
	stepIDs:  "switching to the run_as user",
}

// spawnArgs is everything the child needs, prepared before the clone.
// Pointers are kept as uintptr (the byte slices stay alive through keep),
// so the child never writes a pointer and needs no write barrier.
type spawnArgs struct {
	path, argv, envv, dir uintptr // *byte, **byte, **byte, *byte
	procType, procTarget  uintptr // "proc", "/proc"
	stdio                 [3]uintptr
	errFD                 uintptr // write end of the error pipe
	tty                   uintptr // 1: make stdin the controlling terminal
	nproc                 [2]uint64
	setIDs                uintptr // 1: switch to uid, gid and groups
	uid, gid              uintptr
	groups                uintptr // *uint32
	ngroups               uintptr
	capLast               uintptr
	capHdr                unix.CapUserHeader
	capData               [2]unix.CapUserData
	blockAll, oldMask     uint64
	dfl                   [4]uintptr // struct sigaction with SIG_DFL
	cur                   [4]uintptr // scratch: a handler read back
	status                int32      // scratch: wait4 status
	report                [2]uint32  // scratch: failed step, errno

	keep []any
}

// spawnMu serializes clones: a child copies the init's descriptor table
// and closes all but its own descriptors at once; serializing keeps the
// error pipe of one spawn out of the copy of another.
var spawnMu sync.Mutex

// spawnCommand starts argv in a new PID namespace. stdio are the command's
// descriptors. It returns the pid of the namespace's PID 1 (to wait for
// and to kill), or the step that failed before the program ran.
//
// release must be called once the pid has been reaped: the child may use
// memory of this process until then.
//
// ids, when set, are the manifest user's the command runs as.
func spawnCommand(prog string, argv, env []string, dir string, stdio [3]int, tty bool, nproc int64, capLast int, ids *Credentials) (pid int, release func(), failed uint32, errno syscall.Errno, err error) {
	a := &spawnArgs{capLast: uintptr(capLast), blockAll: ^uint64(0)}
	if tty {
		a.tty = 1
	}
	if ids != nil {
		gs := make([]uint32, len(ids.Groups))
		for i, g := range ids.Groups {
			gs[i] = uint32(g)
		}
		a.setIDs, a.uid, a.gid, a.ngroups = 1, uintptr(ids.UID), uintptr(ids.GID), uintptr(len(gs))
		if len(gs) > 0 {
			a.keep = append(a.keep, gs)
			a.groups = uintptr(unsafe.Pointer(&gs[0]))
		}
	}
	bs := func(s string) uintptr {
		b, err2 := syscall.BytePtrFromString(s)
		if err2 != nil {
			err = err2
			return 0
		}
		a.keep = append(a.keep, b)
		return uintptr(unsafe.Pointer(b))
	}
	vec := func(ss []string) uintptr {
		v, err2 := syscall.SlicePtrFromStrings(ss)
		if err2 != nil {
			err = err2
			return 0
		}
		a.keep = append(a.keep, v)
		return uintptr(unsafe.Pointer(&v[0]))
	}
	a.path, a.argv, a.envv, a.dir = bs(prog), vec(argv), vec(env), bs(dir)
	a.procType, a.procTarget = bs("proc"), bs("/proc")
	if err != nil {
		return 0, nil, 0, 0, fmt.Errorf("command line or environment: %w", err)
	}
	release = func() { runtime.KeepAlive(a) }
	for i, fd := range stdio {
		a.stdio[i] = uintptr(fd)
	}
	a.nproc = [2]uint64{uint64(nproc), uint64(nproc)}
	a.capHdr.Version = unix.LINUX_CAPABILITY_VERSION_3

	var p [2]int
	spawnMu.Lock()
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		spawnMu.Unlock()
		release()
		return 0, nil, 0, 0, err
	}
	a.errFD = uintptr(p[1])
	runtime.LockOSThread()
	r, e := spawn(a)
	runtime.UnlockOSThread()
	unix.Close(p[1])
	spawnMu.Unlock()
	defer unix.Close(p[0])
	if e != 0 {
		release()
		return 0, nil, 0, 0, fmt.Errorf("clone: %w", e)
	}
	// The pipe closes when the program was executed (close-on-exec) and
	// the child closed its copy; a report means a step failed.
	var rep [8]byte
	n, _ := readFull(p[0], rep[:])
	pid = int(r)
	if n == 8 {
		failed = *(*uint32)(unsafe.Pointer(&rep[0]))
		errno = syscall.Errno(*(*uint32)(unsafe.Pointer(&rep[4])))
	}
	return pid, release, failed, errno, nil
}

func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Read(fd, b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || k == 0 {
			return n, err
		}
		n += k
	}
	return n, nil
}

// raw is a system call for the child: no allocation, no stack growth.
//
//go:nosplit
//go:norace
func raw(trap, a1, a2, a3, a4, a5 uintptr) (uintptr, syscall.Errno) {
	r, _, e := syscall.RawSyscall6(trap, a1, a2, a3, a4, a5, 0)
	return r, e
}

// spawn clones the child with every signal blocked (the child keeps them
// blocked until the program's handlers are reset); in the parent it
// restores the signal mask and returns the child's pid.
//
//go:nosplit
//go:norace
func spawn(a *spawnArgs) (uintptr, syscall.Errno) {
	raw(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&a.blockAll)), uintptr(unsafe.Pointer(&a.oldMask)), 8, 0)
	pid, e := cloneInit(a, unix.CLONE_NEWPID|unix.CLONE_NEWNS|uintptr(unix.SIGCHLD))
	raw(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&a.oldMask)), 0, 8, 0)
	return pid, e
}

// fail reports a failed step on descriptor fd and exits.
//
//go:nosplit
//go:norace
func fail(a *spawnArgs, fd uintptr, step uint32, e syscall.Errno) {
	a.report[0], a.report[1] = step, uint32(e)
	raw(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&a.report[0])), 8, 0, 0)
	raw(unix.SYS_EXIT_GROUP, SetupFailedCode, 0, 0, 0, 0)
}

// nsInit is PID 1 of the command's PID namespace.
//
//go:nosplit
//go:norace
func nsInit(a *spawnArgs) {
	// Stdio to 0-2 and the error pipe to 3 (close-on-exec); through fresh
	// numbers first, so no source is overwritten by another's target.
	var tmp [4]uintptr
	src := [4]uintptr{a.stdio[0], a.stdio[1], a.stdio[2], a.errFD}
	for i := 0; i < 4; i++ {
		fd, e := raw(unix.SYS_FCNTL, src[i], unix.F_DUPFD_CLOEXEC, 16, 0, 0)
		if e != 0 {
			fail(a, a.errFD, stepDup, e)
		}
		tmp[i] = fd
	}
	for i := 0; i < 4; i++ {
		fl := uintptr(0)
		if i == 3 {
			fl = unix.O_CLOEXEC
		}
		if _, e := raw(unix.SYS_DUP3, tmp[i], uintptr(i), fl, 0, 0); e != 0 {
			fail(a, a.errFD, stepDup, e)
		}
	}
	// Nothing of the init's (its control socket, other commands' pipes)
	// stays open here.
	if _, e := raw(unix.SYS_CLOSE_RANGE, 4, ^uintptr(0)>>1, 0, 0, 0); e != 0 {
		fail(a, 3, stepDup, e)
	}
	if _, e := raw(unix.SYS_MOUNT, a.procType, a.procTarget, a.procType, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, 0); e != 0 {
		fail(a, 3, stepProc, e)
	}
	child, e := forkProgram(a)
	if e != 0 {
		fail(a, 3, stepFork, e)
	}
	for fd := uintptr(0); fd < 4; fd++ {
		raw(unix.SYS_CLOSE, fd, 0, 0, 0, 0)
	}
	// Reap everything; the command's status is this namespace's exit code.
	for {
		pid, e := raw(unix.SYS_WAIT4, ^uintptr(0), uintptr(unsafe.Pointer(&a.status)), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			raw(unix.SYS_EXIT_GROUP, SetupFailedCode, 0, 0, 0, 0)
		}
		if pid != child {
			continue
		}
		st := uintptr(a.status)
		code := (st >> 8) & 0xff
		if st&0x7f != 0 {
			code = 128 + st&0x7f
		}
		raw(unix.SYS_EXIT_GROUP, code, 0, 0, 0, 0)
	}
}

// runProgram drops every privilege and executes the command.
//
//go:nosplit
//go:norace
func runProgram(a *spawnArgs) {
	if _, e := raw(unix.SYS_SETSID, 0, 0, 0, 0, 0); e != 0 {
		fail(a, 3, stepSetsid, e)
	}
	if a.tty != 0 {
		// The new session's controlling terminal: its stdin.
		if _, e := raw(unix.SYS_IOCTL, 0, unix.TIOCSCTTY, 0, 0, 0); e != 0 {
			fail(a, 3, stepCtty, e)
		}
	}
	if _, e := raw(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NPROC, uintptr(unsafe.Pointer(&a.nproc[0])), 0, 0); e != 0 {
		fail(a, 3, stepRlimit, e)
	}
	// A new, empty session keyring: the inherited one is agentctl's.
	if _, e := raw(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0); e != 0 && e != unix.ENOSYS {
		fail(a, 3, stepKeyring, e)
	}
	for c := uintptr(0); c <= a.capLast; c++ {
		if _, e := raw(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0, 0, 0); e != 0 && e != unix.EINVAL {
			fail(a, 3, stepCaps, e)
		}
	}
	if _, e := raw(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); e != 0 && e != unix.EINVAL {
		fail(a, 3, stepCaps, e)
	}
	const secbits = 1<<0 | 1<<1 | 1<<2 | 1<<3 // SECBIT_NOROOT(_LOCKED), SECBIT_NO_SETUID_FIXUP(_LOCKED)
	if _, e := raw(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, secbits, 0, 0, 0); e != 0 {
		fail(a, 3, stepCaps, e)
	}
	if _, e := raw(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); e != 0 {
		fail(a, 3, stepCaps, e)
	}
	if a.setIDs != 0 {
		// While CAP_SETUID and CAP_SETGID are still effective (the secure
		// bits keep them across the switch; capset below drops them).
		if _, e := raw(unix.SYS_SETGROUPS, a.ngroups, a.groups, 0, 0, 0); e != 0 {
			fail(a, 3, stepIDs, e)
		}
		if _, e := raw(unix.SYS_SETRESGID, a.gid, a.gid, a.gid, 0, 0); e != 0 {
			fail(a, 3, stepIDs, e)
		}
		if _, e := raw(unix.SYS_SETRESUID, a.uid, a.uid, a.uid, 0, 0); e != 0 {
			fail(a, 3, stepIDs, e)
		}
	}
	if _, e := raw(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&a.capHdr)), uintptr(unsafe.Pointer(&a.capData[0])), 0, 0, 0); e != 0 {
		fail(a, 3, stepCaps, e)
	}
	// Without capabilities, as the command itself would.
	if _, e := raw(unix.SYS_CHDIR, a.dir, 0, 0, 0, 0); e != 0 {
		fail(a, 3, stepChdir, e)
	}
	// The init's (Go's) handlers go back to the default before any signal
	// is unblocked; ignored signals stay ignored, as across any exec.
	for sig := uintptr(1); sig <= 64; sig++ {
		if sig == uintptr(unix.SIGKILL) || sig == uintptr(unix.SIGSTOP) {
			continue
		}
		if _, e := raw(unix.SYS_RT_SIGACTION, sig, 0, uintptr(unsafe.Pointer(&a.cur[0])), 8, 0); e != 0 {
			continue // not a valid signal number here
		}
		if a.cur[0] > 1 { // neither SIG_DFL (0) nor SIG_IGN (1)
			if _, e := raw(unix.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&a.dfl[0])), 0, 8, 0); e != 0 {
				fail(a, 3, stepSignals, e)
			}
		}
	}
	raw(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&a.oldMask)), 0, 8, 0)
	_, e := raw(unix.SYS_EXECVE, a.path, a.argv, a.envv, 0, 0)
	fail(a, 3, stepExec, e)
}

// closeFDs closes descriptors, ignoring errors.
func closeFDs(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
