//go:build unix

package local

// File operations on the workspace from the host side. They are the
// shared hostfs.Dir: every path is resolved beneath the workspace
// directory by the kernel (openat2 RESOLVE_BENEATH, or os.Root where the
// kernel lacks it), and tar streams go through hostfs.Extract and
// hostfs.Archive. Symlinks and ".." that leave the workspace are refused
// with sandbox.ErrPathEscape, whatever a command inside created.

import (
	"context"
	"io"
	"io/fs"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// WorkspaceDir is the workspace directory: snapshots archive it directly,
// sparse-aware (archive.HostWorkspace).
func (s *Sandbox) WorkspaceDir() *hostfs.Dir { return s.wsd }

// ReadFile reads at most limit bytes and fails when the file is larger.
// FIFOs, sockets and devices are refused (sandbox.ErrNotRegular) without
// blocking, as by every file method.
func (s *Sandbox) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	return s.wsd.ReadFile(ctx, p, limit)
}

// WriteFile creates parent directories as needed.
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	return s.wsd.WriteFile(ctx, p, data, mode)
}

// Remove removes a file, a symlink or an empty directory.
func (s *Sandbox) Remove(ctx context.Context, p string) error {
	return s.wsd.Remove(ctx, p)
}

// Mkdir creates a directory and its parents.
func (s *Sandbox) Mkdir(ctx context.Context, p string) error {
	return s.wsd.Mkdir(ctx, p)
}

// Stat does not follow a final symlink.
func (s *Sandbox) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	return s.wsd.Stat(ctx, p)
}

// ReadDir lists a directory, sorted by name.
func (s *Sandbox) ReadDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	return s.wsd.ReadDir(ctx, p)
}

// CopyIn extracts a tar stream into dir with the shared safe-extraction
// rules (hostfs.Extract): absolute names, "..", hardlinks, devices,
// FIFOs, symlinks with absolute targets or targets outside the workspace
// and writes through symlinks are refused; modes are sanitized.
func (s *Sandbox) CopyIn(ctx context.Context, dir string, r io.Reader) error {
	return s.wsd.CopyIn(ctx, dir, r)
}

// CopyTreeIn copies a host directory tree into dir directly, file by
// file in the kernel (reflink or copy_file_range where the file systems
// allow, a buffered copy otherwise), with the result and the refusals
// CopyIn gives for its tar (hostfs.CopyTree): manifest trees skip the tar
// stream.
func (s *Sandbox) CopyTreeIn(ctx context.Context, dir string, tree sandbox.HostTree) error {
	return s.wsd.CopyTreeIn(ctx, dir, tree)
}

var _ sandbox.HostTreeCopier = (*Sandbox)(nil)

// CopyOut streams a tar of dir (hostfs.Archive); member names are
// relative to dir, symlinks are archived as links, never followed.
func (s *Sandbox) CopyOut(ctx context.Context, dir string) (io.ReadCloser, error) {
	return s.wsd.CopyOut(ctx, dir)
}
