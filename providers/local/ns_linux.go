//go:build linux

package local

// The namespaced runner. Each exec starts the agentctl binary again, in
// new user, mount, PID, IPC, UTS and (unless network = "host") network
// namespaces, in a hidden init mode (MaybeRunInit). That init process is
// PID 1 of the new PID namespace: it builds a private root (a tmpfs with
// read-only binds of the system directories, a synthesized /etc, a
// minimal /dev, a new /proc, the sandbox's /tmp and the workspace),
// pivots into it, drops every capability and runs the command. When it
// exits, or is killed on timeout, the kernel kills every process left in
// the namespace.
//
// The parent sends the init its configuration over a socket, together
// with the workspace and /tmp mounts when agentctl runs as root: those
// are idmapped mounts (open_tree + mount_setattr) that show files owned
// by the agentctl user as owned by the sandbox user, so host-side file
// tools and sandboxed commands share the workspace, while the sandbox's
// host identity is an unprivileged uid everywhere else.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentctl/agentctl/engine/sandbox"
	"golang.org/x/sys/unix"
)

// initEnv is the environment variable that turns the binary into the
// sandbox init; its value is the control socket's descriptor.
const initEnv = "_AGENTCTL_SANDBOX_INIT"

// initConfig is what the parent sends the init.
type initConfig struct {
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir"`  // absolute, inside the sandbox
	Root    string   `json:"root"` // workspace mount point
	HostNet bool     `json:"host_net"`
	// MountFDs is true when the workspace and /tmp arrive as mount file
	// descriptors (rights[0], rights[1]); otherwise they are bound from
	// WorkspacePath and TmpPath.
	MountFDs      bool     `json:"mount_fds"`
	WorkspacePath string   `json:"workspace_path,omitempty"`
	TmpPath       string   `json:"tmp_path,omitempty"`
	ReadOnly      []string `json:"read_only,omitempty"`
	PIDs          int64    `json:"pids"`
	Probe         bool     `json:"probe,omitempty"`
}

type initStatus struct {
	Error string `json:"error"`
}

// setupFailedCode is the init's exit code when it could not build the
// sandbox (the reason is on the control socket).
const setupFailedCode = 125

// readyByte is what the init sends once the sandbox is built.
const readyByte = 'R'

func (p *Provider) executable() (string, error) {
	if p.opts.Executable != "" {
		return p.opts.Executable, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("local provider: cannot find the agentctl binary to start the sandbox with: %w", err)
	}
	return exe, nil
}

// probe checks that namespaces can be created and the sandbox root built.
func (s *Sandbox) probe(ctx context.Context) error {
	run := &execRun{argv: []string{"true"}, dir: "."}
	_, _, err := s.runInit(ctx, run, sandbox.NewHeadTail(0), sandbox.NewHeadTail(0), true)
	return err
}

func (s *Sandbox) runNamespaced(ctx context.Context, run *execRun) (sandbox.ExecResult, error) {
	stdout, stderr := sandbox.NewHeadTail(run.outputLimit), sandbox.NewHeadTail(run.outputLimit)
	start := time.Now()
	code, timedOut, err := s.runInit(ctx, run, stdout, stderr, false)
	return sandbox.ExecResult{
		ExitCode:       code,
		Stdout:         stdout.Bytes(),
		Stderr:         stderr.Bytes(),
		Wall:           time.Since(start),
		Truncated:      stdout.Truncated() || stderr.Truncated(),
		OriginalStdout: stdout.Total(),
		OriginalStderr: stderr.Total(),
		TimedOut:       timedOut,
	}, err
}

func (s *Sandbox) runInit(ctx context.Context, run *execRun, stdout, stderr io.Writer, probe bool) (int, bool, error) {
	exePath, err := s.p.executable()
	if err != nil {
		return -1, false, err
	}
	exe, err := os.Open(exePath)
	if err != nil {
		return -1, false, fmt.Errorf("local provider: opening the agentctl binary %s: %w", exePath, err)
	}
	defer exe.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, false, fmt.Errorf("local provider: %w", err)
	}
	parentSock := os.NewFile(uintptr(fds[0]), "sandbox-init-parent")
	childSock := os.NewFile(uintptr(fds[1]), "sandbox-init-child")
	defer parentSock.Close()
	defer childSock.Close()

	root := os.Geteuid() == 0
	uid, gid := os.Getuid(), os.Getgid()
	if root {
		uid, gid = s.p.opts.HostID, s.p.opts.HostID
	}
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	hostNet := s.spec.Network == "host"
	if !hostNet {
		flags |= unix.CLONE_NEWNET
	}
	tctx, cancel, timedOut := withTimeout(ctx, run.timeout)
	defer cancel()
	// The binary is executed through its descriptor: the sandbox uid may
	// not be allowed to traverse the directories it lives in.
	cmd := exec.CommandContext(tctx, "/proc/self/fd/3")
	cmd.Args = []string{"agentctl-sandbox-init"}
	cmd.Env = []string{initEnv + "=4", "GOMAXPROCS=1", "GOGC=off"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{exe, childSock}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 flags,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: root,
		// As root, drop the host's supplementary groups (root's group
		// would otherwise still grant access).
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: !root},
		Pdeathsig:  syscall.SIGKILL,
	}
	// Killing PID 1 of the namespace makes the kernel kill every process
	// in it: the whole tree goes.
	cmd.Cancel = func() error { return cmd.Process.Kill() }

	cfg := initConfig{
		Argv: run.argv, Env: envList(run.env), Dir: path.Join(s.spec.Root, run.dir), Root: s.spec.Root,
		HostNet: hostNet, MountFDs: root, ReadOnly: s.p.opts.ReadOnlyPaths,
		PIDs: s.spec.Resources.PIDs, Probe: probe,
	}
	if cfg.PIDs <= 0 {
		cfg.PIDs = DefaultPIDs
	}
	if !root {
		cfg.WorkspacePath, cfg.TmpPath = s.ws, s.tmp
	}
	sendConfig := func() error {
		var rights []int
		if root {
			for _, dir := range []string{s.ws, s.tmp} {
				fd, err := idmappedMount(cmd.Process.Pid, dir)
				if err != nil {
					return err
				}
				defer unix.Close(fd)
				rights = append(rights, fd)
			}
		}
		body, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		var hdr [8]byte
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(body)))
		var oob []byte
		if len(rights) > 0 {
			oob = unix.UnixRights(rights...)
		}
		if err := unix.Sendmsg(int(parentSock.Fd()), hdr[:], oob, nil, 0); err != nil {
			return fmt.Errorf("sending the sandbox configuration: %w", err)
		}
		if _, err := parentSock.Write(body); err != nil {
			return fmt.Errorf("sending the sandbox configuration: %w", err)
		}
		return nil
	}
	afterStart := func() error {
		childSock.Close()
		return sendConfig()
	}
	code, err := runProcess(cmd, run, stdout, stderr, afterStart, nil)
	if ctx.Err() != nil {
		return -1, false, ctx.Err()
	}
	if err != nil && cmd.Process == nil {
		return -1, false, namespaceError(err, s.p.opts.HostID)
	}
	if err == nil && timedOut() {
		return code, true, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(parentSock, 64<<10))
	if err == nil && len(msg) == 1 && msg[0] == readyByte {
		return code, false, nil
	}
	var st initStatus
	if len(msg) > 0 && json.Unmarshal(msg, &st) == nil && st.Error != "" {
		return -1, false, s.setupError(errors.New(st.Error))
	}
	if err != nil && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		return -1, false, s.setupError(err)
	}
	return -1, false, fmt.Errorf("local provider: %s did not act as the sandbox init (exit code %d): the program's main must call local.MaybeRunInit() before anything else", exePath, code)
}

func (s *Sandbox) setupError(err error) error {
	return fmt.Errorf("local sandbox %s: building the isolated environment: %w; set isolation = \"none\" in the local provider block to run without isolation (unsafe: commands then see and can change everything the agentctl user can)", s.spec.Address, err)
}

// namespaceError explains a failure to start the namespaced init.
func namespaceError(err error, hostID int) error {
	hint := ""
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.EUSERS):
		hint = "This machine does not allow creating user namespaces (check the sysctls user.max_user_namespaces and kernel.unprivileged_userns_clone, and any AppArmor or SELinux policy restricting them)"
		if os.Geteuid() == 0 {
			hint += fmt.Sprintf(", or host uid %d, which sandboxes run as when agentctl runs as root, is not mapped in agentctl's own user namespace", hostID)
		}
		hint += ". "
	case errors.Is(err, syscall.EACCES):
		hint = "The agentctl binary must be readable and executable by the sandbox user (by other users when agentctl runs as root). "
	}
	return fmt.Errorf("local provider: cannot start a command in isolated namespaces (%w). %sTo run without isolation, set isolation = \"none\" in the `provider \"local\"` block: that is unsafe, commands then run directly on this machine as the agentctl user", err, hint)
}

// idmappedMount returns a detached clone of dir's mount, idmapped through
// the user namespace of process pid (on-disk owner 0 = the agentctl user
// appears as the sandbox's root), with nosuid and nodev.
func idmappedMount(pid int, dir string) (int, error) {
	userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening the sandbox's user namespace: %w", err)
	}
	defer unix.Close(userns)
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("cloning the mount of %s (open_tree needs Linux 5.2 or later): %w", dir, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("idmapping %s (needs Linux 5.12 or later and a filesystem with idmapped mount support, such as ext4, xfs, btrfs or tmpfs): %w", dir, err)
	}
	return fd, nil
}

// MaybeRunInit runs the sandbox init when this process was started as
// one, and never returns in that case. agentctl's main (and the TestMain
// of packages that use namespaced sandboxes) must call it first:
//
//	func main() {
//		if local.MaybeRunInit() {
//			return
//		}
//		...
//	}
func MaybeRunInit() bool {
	v, ok := os.LookupEnv(initEnv)
	if !ok {
		return false
	}
	os.Unsetenv(initEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "agentctl: invalid %s=%q\n", initEnv, v)
		os.Exit(setupFailedCode)
	}
	os.Exit(runInit(fd))
	return true
}

func runInit(sock int) int {
	// Everything below runs on one thread: capabilities, no_new_privs
	// and securebits are per thread, and the command is forked from it.
	runtime.LockOSThread()
	unix.CloseOnExec(sock)
	unix.Close(3) // the binary itself
	report := func(err error) int {
		b, _ := json.Marshal(initStatus{Error: err.Error()})
		unix.Write(sock, b)
		return setupFailedCode
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
	for _, fd := range rights {
		unix.Close(fd)
	}
	if err := dropPrivileges(cfg.PIDs); err != nil {
		return report(err)
	}
	// Tell the parent the sandbox is built: it distinguishes the command's
	// exit codes from a binary that never acted as the init.
	unix.Write(sock, []byte{readyByte})
	unix.Close(sock)
	if cfg.Probe {
		return 0
	}
	return runCommand(cfg)
}

func readConfig(sock int) (initConfig, []int, error) {
	var cfg initConfig
	hdr := make([]byte, 8)
	oob := make([]byte, unix.CmsgSpace(2*4))
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
	if cfg.MountFDs && len(rights) != 2 {
		return cfg, nil, fmt.Errorf("expected 2 mount descriptors, got %d", len(rights))
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

func buildRoot(cfg initConfig, rights []int) error {
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

func buildEtc(cfg initConfig, etc string) error {
	if err := os.Mkdir(etc, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"passwd":        fmt.Sprintf("root:x:0:0:root:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", cfg.Root),
		"group":         "root:x:0:\nnogroup:x:65534:\n",
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
	if err := unix.Mount("tmpfs", path.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("mounting /dev/shm: %w", err)
	}
	if err := os.Mkdir(path.Join(dev, "pts"), 0o755); err != nil {
		return err
	}
	// A private devpts for programs that need a pseudo-terminal; optional.
	unix.Mount("devpts", path.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
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

// dropPrivileges bounds the process count, then removes every capability
// from this thread (bounding, ambient, effective, permitted, inheritable),
// locks root out of regaining them on exec and sets no_new_privs. The
// command is forked from this thread and inherits all of it.
func dropPrivileges(pids int64) error {
	if pids > 0 {
		lim := unix.Rlimit{Cur: uint64(pids), Max: uint64(pids)}
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
			return fmt.Errorf("limiting processes: %w", err)
		}
	}
	// A new, empty session keyring: the inherited one is agentctl's, and
	// its keys would be readable by their possessor.
	if _, _, errno := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 && errno != unix.ENOSYS {
		return fmt.Errorf("joining a new session keyring: %w", errno)
	}
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	const secbits = 1<<0 | 1<<1 | 1<<2 | 1<<3 // SECBIT_NOROOT(_LOCKED), SECBIT_NO_SETUID_FIXUP(_LOCKED)
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbits, 0, 0, 0); err != nil {
		return fmt.Errorf("setting securebits: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("dropping capabilities: %w", err)
	}
	return nil
}

// runCommand starts the command, reaps every child (it is PID 1) and
// returns the command's exit code; returning ends the namespace.
func runCommand(cfg initConfig) int {
	prog, err := lookPath(cfg.Argv[0], pathOf(cfg.Env), cfg.Dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.Argv[0], err)
		return notFoundCode(err)
	}
	proc, err := os.StartProcess(prog, cfg.Argv, &os.ProcAttr{
		Dir:   cfg.Dir,
		Env:   cfg.Env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.Argv[0], err)
		return notFoundCode(err)
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 1
		}
		if pid != proc.Pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// runProcess starts cmd with its output on pipes drained into run's
// writers, waits for it, calls afterExit (to kill what is left), and
// drains the output. The command's context (timeout, cancellation) kills
// the process through cmd.Cancel.
func runProcess(cmd *exec.Cmd, run *execRun, stdout, stderr io.Writer, afterStart func() error, afterExit func()) (code int, err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return -1, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.Stdin = run.stdin
	cmd.WaitDelay = ioGrace
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return -1, err
	}
	outW.Close()
	errW.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(stdout, outR); done <- struct{}{} }()
	go func() { io.Copy(stderr, errR); done <- struct{}{} }()

	var startErr error
	if afterStart != nil {
		if startErr = afterStart(); startErr != nil {
			cmd.Process.Kill()
		}
	}
	waitErr := cmd.Wait()
	if afterExit != nil {
		afterExit()
	}
	grace := time.NewTimer(ioGrace)
	for i := 0; i < 2; i++ {
		select {
		case <-done:
		case <-grace.C:
			outR.Close()
			errR.Close()
			<-done
		}
	}
	grace.Stop()
	outR.Close()
	errR.Close()

	if startErr != nil {
		return -1, startErr
	}
	ps := cmd.ProcessState
	if ps == nil {
		return -1, waitErr
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	} else {
		code = ps.ExitCode()
	}
	return code, nil
}

// groupSysProcAttr puts an unisolated command in its own process group,
// killed with agentctl.
func groupSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func pathOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}
