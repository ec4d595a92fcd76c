//go:build !linux

package mount

import (
	"context"
	"errors"
	"path/filepath"
	"time"
)

// errLinux is why mounts cannot be made here.
var errLinux = errors.New("storage mounts need Linux (rclone's FUSE mount, bound into the sandbox)")

// Mounter makes and clears the mounts of one state directory; outside
// Linux it makes none.
type Mounter struct {
	Dir     string
	Rclone  string
	Environ []string
	Timeout time.Duration
}

// HostDir is where the mount of o's workspace path would be made.
func (m *Mounter) HostDir(o Owner, path string) string { return filepath.Join(m.Dir, key(o, path)) }

// Available says why mounts cannot be made on this machine.
func (m *Mounter) Available() error { return errLinux }

// Mount fails: mounts need Linux.
func (m *Mounter) Mount(context.Context, Owner, Def) (string, error) { return "", errLinux }

// Live is false: nothing is mounted here.
func (m *Mounter) Live(string) bool { return false }

// Unmount has nothing to clear.
func (m *Mounter) Unmount(context.Context, Owner, string) error { return nil }

// Clear has nothing to clear.
func (m *Mounter) Clear(context.Context, Owner) error { return nil }

// Owners is empty: nothing is mounted here.
func (m *Mounter) Owners() ([]Owner, error) { return nil, nil }
