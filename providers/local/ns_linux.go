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
// descriptors (SCM_RIGHTS), or, for a command on a terminal, none: the
// init then opens the terminal from the sandbox's own /dev/pts (so the
// command finds it by name) and sends its controlling side back; the
// init starts the command in a PID namespace of its own and sends its
// exit status back. The init's side
// is internal/nsinit, a package of its own so that it starts early.
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
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/providers/local/internal/nsinit"
	"github.com/agentctl/agentctl/sandbox"
)

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

// This package's initialization runs removeInUserNS's helper when this
// process was started as one. The sandbox init itself starts earlier,
// while internal/nsinit is initialized (see there).
func init() { maybeRemove() }

// MaybeRunInit runs the sandbox init when this process was started as
// one, or removes a sandbox directory when it was started as
// removeInUserNS's helper, and never returns in those cases (the process
// exits with their status); otherwise it returns at once. Package
// initialization already does both; agentctl's main (and the TestMain
// of packages that use namespaced sandboxes) also call it first, which
// makes the entry point explicit:
//
//	func main() {
//		local.MaybeRunInit()
//		...
//	}
func MaybeRunInit() {
	maybeRemove()
	nsinit.MaybeRun()
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

// groupSysProcAttr puts an unisolated command in its own process group,
// killed with agentctl.
func groupSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
