//go:build linux

package nsinit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The init starts while this package is initialized (init below). Go
// initializes a program's packages one at a time, each once its imports
// are, picking the first ready one in import-path order. This package
// imports only golang.org/x/sys/unix and standard library packages that
// are initialized early (not net, path/filepath or runtime/debug, whose
// paths sort after most third-party packages'), so it is ready after
// about 100 small package inits, and its path sorts before the
// third-party packages still waiting: the OpenAI, Docker and Kubernetes
// clients are never initialized in the init. (From providers/local, it
// started after 325, 2.1 MB of allocations; internal/layering checks
// this.)
func init() { MaybeRun() }

// MaybeRun runs the sandbox init when this process was started as one
// (Env is set), and never returns then: the process exits with the
// init's status. Otherwise it returns at once.
func MaybeRun() {
	v, ok := os.LookupEnv(Env)
	if !ok {
		return
	}
	os.Unsetenv(Env)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "agentctl: invalid %s=%q\n", Env, v)
		os.Exit(SetupFailedCode)
	}
	os.Exit(runInit(fd))
}

func runInit(sock int) int {
	// The root is built on one thread (the mount namespace, root and
	// working directory are shared by all threads).
	runtime.LockOSThread()
	unix.CloseOnExec(sock)
	unix.Close(3) // the binary itself
	report := func(err error) int {
		b, _ := json.Marshal(Status{Error: err.Error()})
		unix.Write(sock, b)
		return SetupFailedCode
	}
	cfg, rights, err := readConfig(sock)
	if err != nil {
		return report(err)
	}
	for _, fd := range rights {
		unix.CloseOnExec(fd)
	}
	if err := buildRoot(cfg, rights); err != nil {
		return report(err)
	}
	closeFDs(rights...)
	// Only the commands that ask for a terminal fail without it.
	ptsErr := mountPts()
	capLast := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil {
			capLast = n
		}
	}
	// Commands are forked from a copy of this process, and the fewer
	// pages it has mapped the cheaper the fork; starting before most
	// packages are initialized keeps it small. (runtime/debug.FreeOSMemory
	// is not called: importing runtime/debug, whose path sorts after most
	// third-party packages, would make this package wait for theirs.)
	// Tell agentctl the sandbox is built: it distinguishes this from a
	// binary that never acted as the init.
	unix.Write(sock, []byte{ReadyByte})
	serve(sock, &server{cfg: cfg, capLast: capLast, ptsErr: ptsErr})
	// Returning ends PID 1 of the sandbox: the kernel kills every process
	// left in it.
	return 0
}

func readConfig(sock int) (Config, []int, error) {
	var cfg Config
	hdr := make([]byte, 8)
	oob := make([]byte, unix.CmsgSpace((2+MaxMounts)*4))
	n, oobn, _, _, err := unix.Recvmsg(sock, hdr, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return cfg, nil, fmt.Errorf("reading the configuration: %w", err)
	}
	var rights []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return cfg, nil, err
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err == nil {
				rights = append(rights, fds...)
			}
		}
	}
	if n < 8 {
		if _, err := io.ReadFull(rawReader(sock), hdr[n:]); err != nil {
			return cfg, nil, fmt.Errorf("reading the configuration: %w", err)
		}
	}
	size := binary.LittleEndian.Uint64(hdr)
	if size > 64<<20 {
		return cfg, nil, fmt.Errorf("configuration too large (%d bytes)", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(rawReader(sock), body); err != nil {
		return cfg, nil, fmt.Errorf("reading the configuration: %w", err)
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		return cfg, nil, fmt.Errorf("decoding the configuration: %w", err)
	}
	if cfg.MountFDs && len(rights) != 2+len(cfg.Mounts) {
		return cfg, nil, fmt.Errorf("expected %d mount descriptors, got %d", 2+len(cfg.Mounts), len(rights))
	}
	return cfg, rights, nil
}

// rawReader reads a descriptor without handing it to the runtime poller
// (and without an *os.File whose finalizer would close it).
type rawReader int

func (r rawReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// systemDirs are bound read-only when they are directories, recreated
// when they are symlinks (merged /usr).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcAllowed are the /etc entries a shell, the dynamic linker, TLS and
// common toolchains read. Everything else in the host's /etc (shadow,
// sudoers, ssh keys, service credentials) is absent.
var etcAllowed = []string{
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
	"localtime", "timezone", "mime.types", "os-release", "lsb-release", "debian_version",
	"protocols", "services", "gai.conf", "inputrc", "profile", "bash.bashrc", "terminfo",
}

const newRoot = "/tmp" // staging mount point, only in the new mount namespace

func buildRoot(cfg Config, rights []int) error {
	// Nothing done here may propagate back to the host (a new mount
	// namespace owned by a new user namespace only receives propagation;
	// private makes it explicit).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	// Without mount descriptors the workspace and /tmp are bound by path:
	// open them before the staging tmpfs hides the host's /tmp.
	wsFD, tmpFD := -1, -1
	if cfg.MountFDs {
		wsFD, tmpFD = rights[0], rights[1]
	} else {
		var err error
		if wsFD, err = unix.Open(cfg.WorkspacePath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("opening workspace %s: %w", cfg.WorkspacePath, err)
		}
		defer unix.Close(wsFD)
		if tmpFD, err = unix.Open(cfg.TmpPath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("opening %s: %w", cfg.TmpPath, err)
		}
		defer unix.Close(tmpFD)
	}
	// The storage mounts too: they may be under the host's /tmp.
	var mountFDs []int
	if cfg.MountFDs {
		mountFDs = rights[2:]
	} else {
		var err error
		if mountFDs, err = openMounts(cfg.Mounts); err != nil {
			return err
		}
		defer closeAll(mountFDs)
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return fmt.Errorf("mounting the sandbox root tmpfs: %w", err)
	}
	nr := func(p string) string { return newRoot + p }

	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			t, err := os.Readlink(d)
			if err != nil {
				return err
			}
			if err := os.Symlink(t, nr(d)); err != nil {
				return err
			}
			continue
		}
		if fi.IsDir() {
			if err := bindReadOnly(d, nr(d), true); err != nil {
				return err
			}
		}
	}
	if err := buildEtc(cfg, nr("/etc")); err != nil {
		return err
	}
	if err := buildDev(nr("/dev")); err != nil {
		return err
	}
	if err := os.Mkdir(nr("/proc"), 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", nr("/proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	if err := os.Mkdir(nr("/tmp"), 0o755); err != nil {
		return err
	}
	if err := attach(cfg.MountFDs, tmpFD, nr("/tmp")); err != nil {
		return fmt.Errorf("mounting /tmp: %w", err)
	}
	if err := os.MkdirAll(nr(cfg.Root), 0o755); err != nil {
		return err
	}
	if err := attach(cfg.MountFDs, wsFD, nr(cfg.Root)); err != nil {
		return fmt.Errorf("mounting the workspace at %s: %w", cfg.Root, err)
	}
	if err := bindMounts(cfg.MountFDs, cfg.Mounts, mountFDs, nr); err != nil {
		return err
	}
	for _, p := range cfg.ReadOnly {
		if visible(p) {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("read-only path %s: %w", p, err)
		}
		if fi.IsDir() {
			err = os.MkdirAll(nr(p), 0o755)
		} else if err = os.MkdirAll(path.Dir(nr(p)), 0o755); err == nil {
			err = os.WriteFile(nr(p), nil, 0o644)
		}
		if err != nil {
			return err
		}
		if err := bindReadOnly(p, nr(p), fi.IsDir()); err != nil {
			return err
		}
	}

	// Conventional paths some tools expect.
	if err := os.MkdirAll(nr("/var"), 0o755); err != nil {
		return err
	}
	for link, target := range map[string]string{"/var/tmp": "/tmp", "/etc/mtab": "/proc/self/mounts"} {
		if err := os.Symlink(target, nr(link)); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}

	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("making the sandbox root read-only: %w", err)
	}
	if err := unix.Sethostname([]byte("sandbox")); err != nil {
		return fmt.Errorf("setting the hostname: %w", err)
	}
	if !cfg.HostNet {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bringing up the loopback interface: %w", err)
		}
	}
	return nil
}

// visible reports whether p is already inside a bound system directory.
func visible(p string) bool {
	for _, d := range systemDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// attach mounts the workspace or /tmp at target: a received mount
// descriptor is moved there; a path descriptor is bound.
func attach(isMount bool, fd int, target string) error {
	if isMount {
		return unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
	}
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.MountSetattr(unix.AT_FDCWD, target, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV})
}

// bindReadOnly binds src at dst (which must exist for files) read-only,
// nosuid and nodev, recursively.
func bindReadOnly(src, dst string, isDir bool) error {
	if isDir {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %w", src, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("making %s read-only: %w", dst, err)
	}
	return nil
}

func buildEtc(cfg Config, etc string) error {
	if err := os.Mkdir(etc, 0o755); err != nil {
		return err
	}
	passwd, group := cfg.Passwd, cfg.Group
	files := map[string]string{
		"passwd":        passwd,
		"group":         group,
		"hostname":      "sandbox\n",
		"hosts":         "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"resolv.conf":   "# this sandbox has no network\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
	}
	if cfg.HostNet {
		delete(files, "hosts")
		delete(files, "resolv.conf")
	}
	for name, content := range files {
		if err := os.WriteFile(path.Join(etc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	allowed := etcAllowed
	if cfg.HostNet {
		allowed = append(slicesClone(allowed), "hosts", "resolv.conf")
	}
	for _, name := range allowed {
		src := path.Join("/etc", name)
		dst := path.Join(etc, name)
		fi, err := os.Lstat(src)
		if err != nil {
			if cfg.HostNet && (name == "hosts" || name == "resolv.conf") {
				os.WriteFile(dst, nil, 0o644)
			}
			continue
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if strings.HasPrefix(t, "/run/") || strings.HasPrefix(t, "../run/") {
				// e.g. resolv.conf managed by systemd-resolved: bind
				// the target's content.
				if err := os.WriteFile(dst, nil, 0o644); err != nil {
					return err
				}
				if err := bindReadOnly(src, dst, false); err != nil {
					return err
				}
				continue
			}
			if err := os.Symlink(t, dst); err != nil {
				return err
			}
		case fi.IsDir():
			if err := bindReadOnly(src, dst, true); err != nil {
				return err
			}
		case fi.Mode().IsRegular() && fi.Size() <= copyLimit:
			// Small files are copied: a bind mount per file would cost
			// more, at setup and at teardown, than the copy.
			if err := copySmallFile(src, dst, copyLimit); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := os.WriteFile(dst, nil, 0o644); err != nil {
				return err
			}
			if err := bindReadOnly(src, dst, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyLimit is the size up to which /etc files are copied, not bound.
const copyLimit = 256 << 10

// copySmallFile copies a world-readable file; a file the sandbox user
// could not read is not copied (the copy would be readable).
func copySmallFile(src, dst string, limit int64) error {
	f, err := os.Open(src)
	if err != nil {
		return nil // unreadable for the sandbox user: leave it out
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(b)) > limit {
		return nil
	}
	return os.WriteFile(dst, b, 0o644)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func buildDev(dev string) error {
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mounting /dev: %w", err)
	}
	for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		dst := path.Join(dev, name)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+name, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding /dev/%s: %w", name, err)
		}
	}
	for name, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
		"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx",
	} {
		if err := os.Symlink(target, path.Join(dev, name)); err != nil {
			return err
		}
	}
	if err := os.Mkdir(path.Join(dev, "shm"), 0o755); err != nil {
		return err
	}
	shmOpts := fmt.Sprintf("mode=1777,size=%dm,nr_inodes=%d", ShmSizeMB, ShmInodes)
	if err := unix.Mount("tmpfs", path.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, shmOpts); err != nil {
		return fmt.Errorf("mounting /dev/shm: %w", err)
	}
	// For mountPts.
	return os.Mkdir(path.Join(dev, "pts"), 0o755)
}

// mountPts mounts the sandbox's private devpts at /dev/pts, once the
// root is built: the terminals of commands started on one (see
// terminal) and of programs that open their own.
func mountPts() error {
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mounting a devpts instance at /dev/pts: %w", err)
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

func pathOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}

// server is the init serving the commands of the sandbox it built.
type server struct {
	cfg     Config
	capLast int
	// ptsErr is why the sandbox has no /dev/pts of its own (nil: it
	// has one).
	ptsErr error
}

// serve accepts command connections from the control socket until
// agentctl closes it.
func serve(sock int, srv *server) {
	ctl, err := pollable(sock, "sandbox-control")
	if err != nil {
		return
	}
	buf := make([]byte, 1)
	for {
		n, fds, err := recvmsg(ctl, buf, 1)
		if err != nil || n == 0 {
			closeFDs(fds...)
			return
		}
		if len(fds) != 1 {
			closeFDs(fds...)
			continue
		}
		go srv.serveExec(fds[0])
	}
}

// pollable makes descriptor fd an *os.File that the runtime's poller
// serves: a pending Read waits without holding a thread, and Close ends
// it. (net.FileConn would do the same for a socket, but this package
// does not link net: see init.)
func pollable(fd int, name string) (*os.File, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// recvmsg reads into buf from the socket f, with the descriptors passed
// along (at most maxFDs, close-on-exec).
func recvmsg(f *os.File, buf []byte, maxFDs int) (int, []int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, nil, err
	}
	oob := make([]byte, unix.CmsgSpace(maxFDs*4))
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	var fds []int
	if oobn > 0 {
		fds = parseRights(oob[:oobn])
	}
	if err == nil {
		err = rerr
	}
	return n, fds, err
}

func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

// serveExec runs the one command requested on connection fd.
func (srv *server) serveExec(fd int) {
	conn, err := pollable(fd, "sandbox-exec")
	if err != nil {
		return
	}
	defer conn.Close()
	reply := func(st ExecStatus) {
		b, _ := json.Marshal(st)
		conn.Write(b)
	}
	req, stdio, err := readRequest(conn)
	defer func() { closeFDs(stdio...) }()
	if err != nil {
		reply(ExecStatus{Error: err.Error()})
		return
	}
	if req.TTY {
		if stdio, err = srv.terminal(conn, req); err != nil {
			reply(ExecStatus{Error: err.Error()})
			return
		}
	}
	prog, err := LookPath(req.Argv[0], pathOf(req.Env), req.Dir)
	if err != nil {
		unix.Write(stdio[2], []byte(fmt.Sprintf("%s: %v\n", req.Argv[0], err)))
		reply(ExecStatus{Code: NotFoundCode(err)})
		return
	}
	// Taken: from here on the command may run, so agentctl must not run
	// it again if this init dies, even before the command is known to
	// have started (a retry would run it twice).
	conn.Write([]byte{StartedByte})
	pid, release, failed, errno, err := spawnCommand(prog, req.Argv, req.Env, req.Dir, [3]int{stdio[0], stdio[1], stdio[2]}, req.TTY, srv.cfg.PIDs, srv.capLast, req.Cred)
	if err != nil {
		reply(ExecStatus{Error: "starting the command: " + err.Error()})
		return
	}
	if failed == stepExec {
		msg := fmt.Sprintf("%s: %v\n", req.Argv[0], errno)
		unix.Write(stdio[2], []byte(msg))
	}
	// The command holds its own copies: close ours, so its output ends
	// when it does.
	closeFDs(stdio...)
	stdio = nil

	// A kill request, or agentctl closing the connection, kills the
	// command's namespace. The pid is not reaped (so not reused) before
	// reaped is set under mu.
	var mu sync.Mutex
	reaped := false
	go func() {
		b := make([]byte, 1)
		conn.Read(b)
		mu.Lock()
		if !reaped {
			unix.Kill(pid, unix.SIGKILL)
		}
		mu.Unlock()
	}()
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	mu.Lock()
	reaped = true
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
	mu.Unlock()
	release()
	switch {
	case failed == stepExec:
		code := 126
		if errno == unix.ENOENT {
			code = 127
		}
		reply(ExecStatus{Code: code})
	case failed != 0:
		reply(ExecStatus{Error: fmt.Sprintf("starting the command: %s: %v", stepNames[failed], errno)})
	case ws.Signaled():
		reply(ExecStatus{Code: 128 + int(ws.Signal()), Killed: true})
	default:
		reply(ExecStatus{Code: ws.ExitStatus()})
	}
}
