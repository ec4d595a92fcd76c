//go:build linux

package local

// The namespaced runner. Each sandbox has one long-lived init: the
// agentctl binary started again in new user, mount, PID, IPC, UTS and
// (unless network = "host") network namespaces, in a hidden init mode
// (MaybeRunInit). That process is PID 1 of the sandbox's PID namespace.
// It builds the private root once (a tmpfs with read-only binds of the
// system directories, a synthesized /etc, a minimal /dev, /proc, the
// sandbox's /tmp and the workspace), pivots into it, and then serves
// commands: for each, agentctl hands it a connection over the control
// socket, with the command line and its stdin, stdout and stderr
// descriptors (SCM_RIGHTS); the init starts the command in a PID
// namespace of its own (spawn_linux.go) and sends its exit status back.
// Closing the connection, or a kill request on it, kills the command's
// namespace, hence its whole process tree.
//
// The init lives while agentctl does: it dies with it (PR_SET_PDEATHSIG),
// and with it the kernel kills every process of the sandbox; Stop and
// Delete kill it; the next command (or the next agentctl process) starts
// a new one.
//
// The parent sends the init its configuration over the control socket,
// together with the workspace and /tmp mounts when agentctl runs as root:
// those are idmapped mounts (open_tree + mount_setattr) that show files
// owned by the agentctl user as owned by the sandbox user, so host-side
// file tools and sandboxed commands share the workspace, while the
// sandbox's host identity is an unprivileged uid everywhere else.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/sandbox"
)

// initEnv is the environment variable that turns the binary into the
// sandbox init; its value is the control socket's descriptor.
const initEnv = "_AGENTCTL_SANDBOX_INIT"

// initConfig is what the parent sends the init.
type initConfig struct {
	Root    string `json:"root"` // workspace mount point
	HostNet bool   `json:"host_net"`
	// MountFDs is true when the workspace and /tmp arrive as mount file
	// descriptors (rights[0], rights[1]); otherwise they are bound from
	// WorkspacePath and TmpPath.
	MountFDs      bool     `json:"mount_fds"`
	WorkspacePath string   `json:"workspace_path,omitempty"`
	TmpPath       string   `json:"tmp_path,omitempty"`
	ReadOnly      []string `json:"read_only,omitempty"`
	PIDs          int64    `json:"pids"`
	// Accounts are the manifest's users and groups, mapped into the
	// sandbox's user namespace and listed in its /etc/passwd and
	// /etc/group.
	Accounts sandbox.Accounts `json:"accounts,omitzero"`
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
		return "", fmt.Errorf("cannot find the agentctl binary to start the sandbox with: %w", err)
	}
	return exe, nil
}

func (s *Sandbox) setupError(err error) error {
	return fmt.Errorf("building the isolated environment: %w; set isolation = \"none\" in the `provider \"local\"` block to run without isolation (unsafe: commands then see and can change everything the agentctl user can)", err)
}

// namespaceError explains a failure to start the namespaced init.
func namespaceError(err error, hostID int) error {
	hint := ""
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.EUSERS):
		hint = "This machine does not allow creating user namespaces (check the sysctls user.max_user_namespaces and kernel.unprivileged_userns_clone, and any AppArmor or SELinux policy restricting them)"
		if mode, _ := currentIDMode(); mode == idsHostRoot {
			hint += fmt.Sprintf(", or host uid %d, which sandboxes run as when agentctl runs as root, is not mapped in agentctl's own user namespace", hostID)
		}
		hint += ". "
	case errors.Is(err, syscall.EACCES):
		hint = "The agentctl binary must be readable and executable by the sandbox user (by other users when agentctl runs as root). "
	}
	return fmt.Errorf("cannot start a command in isolated namespaces (%w). %sTo run without isolation, set isolation = \"none\" in the `provider \"local\"` block: that is unsafe, commands then run directly on this machine as the agentctl user", err, hint)
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

// The sandbox init starts while this package is initialized: Go
// initializes a program's packages in import-path order as their
// imports are ready, so the packages agentctl links but the init never
// uses (the OpenAI client, the MCP SDK, JSON Schema, ...) mostly come
// later, and the init does not pay for them before it builds the
// sandbox.
func init() { MaybeRunInit() }

// MaybeRunInit runs the sandbox init when this process was started as
// one, or removes a sandbox directory when it was started as
// removeInUserNS's helper, and never returns in those cases (the process
// exits with their status); otherwise it returns at once. This package's initialization
// calls it; agentctl's main (and the TestMain of packages that use
// namespaced sandboxes) also call it first, which makes the entry point
// explicit:
//
//	func main() {
//		local.MaybeRunInit()
//		...
//	}
func MaybeRunInit() {
	maybeRemove()
	v, ok := os.LookupEnv(initEnv)
	if !ok {
		return
	}
	os.Unsetenv(initEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "agentctl: invalid %s=%q\n", initEnv, v)
		os.Exit(setupFailedCode)
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
	closeFDs(rights...)
	capLast := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil {
			capLast = n
		}
	}
	// Commands are forked from a copy of this process: the fewer pages it
	// has mapped the cheaper the fork, so give back what package
	// initialization and building the root left behind.
	debug.FreeOSMemory()
	// Tell agentctl the sandbox is built: it distinguishes this from a
	// binary that never acted as the init.
	unix.Write(sock, []byte{readyByte})
	serve(sock, cfg, capLast)
	// Returning ends PID 1 of the sandbox: the kernel kills every process
	// left in it.
	return 0
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
	passwd, group := accountFiles(cfg.Root, cfg.Accounts)
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

// accountFiles are the sandbox's /etc/passwd and /etc/group: root,
// nobody, and the manifest's users (home: the workspace root, as root's)
// with their private groups and the manifest's groups.
func accountFiles(root string, a sandbox.Accounts) (passwd, group string) {
	var pw, gr strings.Builder
	fmt.Fprintf(&pw, "root:x:0:0:root:%s:/bin/sh\n", root)
	gr.WriteString("root:x:0:\n")
	for _, u := range a.Users {
		fmt.Fprintf(&pw, "%s:x:%d:%d::%s:/bin/sh\n", u.Name, u.UID, u.UID, root)
		fmt.Fprintf(&gr, "%s:x:%d:\n", u.Name, u.UID)
	}
	for _, g := range a.Groups {
		fmt.Fprintf(&gr, "%s:x:%d:%s\n", g.Name, g.GID, strings.Join(g.Users, ","))
	}
	pw.WriteString("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	gr.WriteString("nogroup:x:65534:\n")
	return pw.String(), gr.String()
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
	shmOpts := fmt.Sprintf("mode=1777,size=%dm,nr_inodes=%d", ShmSizeMB, shmInodes)
	if err := unix.Mount("tmpfs", path.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, shmOpts); err != nil {
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

// execRequest is one command, sent on its own connection.
type execRequest struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"` // absolute, inside the sandbox
	// TTY says stdio is a terminal, which becomes the command's
	// controlling terminal.
	TTY bool `json:"tty,omitempty"`
	// User, when set, is the manifest user the command runs as (its ids
	// come from the init's configuration).
	User string `json:"user,omitempty"`
}

// execStatus is the init's answer once the command's namespace is gone.
type execStatus struct {
	Code   int    `json:"code"`
	Killed bool   `json:"killed,omitempty"` // killed on request
	Error  string `json:"error,omitempty"`  // the command could not be started
}

// killByte on a command's connection asks the init to kill the command.
const killByte = 'K'

// startedByte precedes the answer once the init has taken the command,
// before it starts it: agentctl retries (in a new init) only a command
// that was never taken.
const startedByte = 'S'

// maxMessage bounds a request or answer.
const maxMessage = 64 << 20

// serve accepts command connections from the control socket until
// agentctl closes it.
func serve(sock int, cfg initConfig, capLast int) {
	ctl, err := fileConn(os.NewFile(uintptr(sock), "sandbox-control"))
	if err != nil {
		return
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := ctl.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		fds := parseRights(oob[:oobn])
		if len(fds) != 1 {
			closeFDs(fds...)
			continue
		}
		go serveExec(fds[0], cfg, capLast)
	}
}

// fileConn turns a Unix socket descriptor into a connection (the runtime's
// poller then serves it) and closes f.
func fileConn(f *os.File) (*net.UnixConn, error) {
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("%s is not a Unix socket", f.Name())
	}
	return uc, nil
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
func serveExec(fd int, cfg initConfig, capLast int) {
	conn, err := fileConn(os.NewFile(uintptr(fd), "sandbox-exec"))
	if err != nil {
		return
	}
	defer conn.Close()
	reply := func(st execStatus) {
		b, _ := json.Marshal(st)
		conn.Write(b)
	}
	hdr := make([]byte, 8)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(hdr, oob)
	stdio := parseRights(oob[:max(oobn, 0)])
	defer func() { closeFDs(stdio...) }()
	if err == nil && n < 8 {
		_, err = io.ReadFull(conn, hdr[n:])
	}
	if err != nil || len(stdio) != 3 {
		reply(execStatus{Error: fmt.Sprintf("malformed request (%d descriptors, %v)", len(stdio), err)})
		return
	}
	size := binary.LittleEndian.Uint64(hdr)
	if size > maxMessage {
		reply(execStatus{Error: fmt.Sprintf("request too large (%d bytes)", size)})
		return
	}
	body := make([]byte, size)
	var req execRequest
	if _, err := io.ReadFull(conn, body); err != nil {
		return
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Argv) == 0 {
		reply(execStatus{Error: fmt.Sprintf("malformed request: %v", err)})
		return
	}
	var ids *credentials
	if req.User != "" {
		uid, gid, groups, err := cfg.Accounts.Lookup(req.User)
		if err != nil {
			reply(execStatus{Error: err.Error()})
			return
		}
		ids = &credentials{uid: uid, gid: gid, groups: groups}
	}
	prog, err := lookPath(req.Argv[0], pathOf(req.Env), req.Dir)
	if err != nil {
		unix.Write(stdio[2], []byte(fmt.Sprintf("%s: %v\n", req.Argv[0], err)))
		reply(execStatus{Code: notFoundCode(err)})
		return
	}
	// Taken: from here on the command may run, so agentctl must not run
	// it again if this init dies, even before the command is known to
	// have started (a retry would run it twice).
	conn.Write([]byte{startedByte})
	pid, release, failed, errno, err := spawnCommand(prog, req.Argv, req.Env, req.Dir, [3]int{stdio[0], stdio[1], stdio[2]}, req.TTY, cfg.PIDs, capLast, ids)
	if err != nil {
		reply(execStatus{Error: "starting the command: " + err.Error()})
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
		reply(execStatus{Code: code})
	case failed != 0:
		reply(execStatus{Error: fmt.Sprintf("starting the command: %s: %v", stepNames[failed], errno)})
	case ws.Signaled():
		reply(execStatus{Code: 128 + int(ws.Signal()), Killed: true})
	default:
		reply(execStatus{Code: ws.ExitStatus()})
	}
}
