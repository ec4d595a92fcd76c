package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/providers/local/internal/nsinit"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/mount"
)

// bindMounts binds each storage mount (made on the host by the engine,
// sandbox/mount) at its path in the workspace directory, where file
// operations and commands without isolation see it; a namespaced
// sandbox's init binds it again inside (nsinit.Config.Mounts). A bind
// already there is kept when its mount is live, and made anew when the
// mount it showed was made again.
func bindMounts(ws string, mounts []sandbox.Mount) error {
	if len(mounts) > nsinit.MaxMounts {
		return fmt.Errorf("a local sandbox takes at most %d storage mounts; the manifest has %d", nsinit.MaxMounts, len(mounts))
	}
	if len(mounts) > 0 && os.Geteuid() != 0 {
		return fmt.Errorf("binding storage mounts into the workspace needs agentctl to run as root (it runs as uid %d)", os.Geteuid())
	}
	for _, m := range mounts {
		target := filepath.Join(ws, filepath.FromSlash(m.Path))
		if err := bindOne(m, target); err != nil {
			return fmt.Errorf("binding the mount at %s: %w", m.Path, err)
		}
	}
	return nil
}

func bindOne(m sandbox.Mount, target string) error {
	if same(m.HostDir, target) {
		return nil
	}
	// A bind of a mount since made again is dead; detach it.
	if err := mount.UnmountUnder(target); err != nil {
		return err
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(m.HostDir, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", m.HostDir, err)
	}
	if m.ReadOnly {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(unix.AT_FDCWD, target, 0, &attr); err != nil {
			unix.Unmount(target, unix.MNT_DETACH)
			return fmt.Errorf("making %s read-only: %w", target, err)
		}
	}
	return nil
}

// same says whether target shows the file system mounted at hostDir (a
// live bind of it): the same device, and the root of both.
func same(hostDir, target string) bool {
	var a, b unix.Stat_t
	if unix.Stat(hostDir, &a) != nil || unix.Stat(target, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// unbindAll detaches every mount under a sandbox directory before it is
// removed, so that removing it never deletes a bucket's files.
func unbindAll(dir string) error {
	if err := mount.UnmountUnder(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// nsMounts are the mounts as the init binds them inside the sandbox.
func nsMounts(root string, mounts []sandbox.Mount) []nsinit.Mount {
	var out []nsinit.Mount
	for _, m := range mounts {
		out = append(out, nsinit.Mount{HostDir: m.HostDir, Target: root + "/" + m.Path, ReadOnly: m.ReadOnly})
	}
	return out
}
