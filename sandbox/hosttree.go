package sandbox

import (
	"context"
	"io"
)

// HostTreeCopier is an optional interface a Sandbox implements when its
// workspace is a host directory and can take a host directory tree
// directly, file by file (copy_file_range, a reflink where the file
// system has them), instead of as a tar stream through CopyIn. Manifest
// trees (local_dir, git_repo) use it when it is there. The result must be
// the one CopyIn gives for the tar of the same tree: the same entries,
// sanitized modes and modification times (to the second), the same
// refusals (never writing through a symlink in the workspace, the same
// limits), and the same Digest stream.
type HostTreeCopier interface {
	// CopyTreeIn copies tree into directory dir of the workspace (created
	// if missing).
	CopyTreeIn(ctx context.Context, dir string, tree HostTree) error
}

// HostTree is a directory tree on the host to copy into a workspace.
type HostTree struct {
	// Root is the host directory the tree is resolved beneath; Dir is the
	// directory to copy, relative to Root ("" or "." for Root itself).
	Root, Dir string
	// Exclude is asked for every entry (path relative to Dir,
	// slash-separated); true leaves it out, and for a directory its whole
	// subtree.
	Exclude func(rel string, isDir bool) bool
	// Strict makes symlinks and special files errors (local_dir);
	// otherwise symlinks are copied as symlinks and special files skipped.
	Strict bool
	// Digest, when set, receives the canonical encoding of the tree that
	// a tar of it would give (hostfs.ArchiveOptions.Digest), so a content
	// digest is the same whichever way the tree went in.
	Digest io.Writer
}
