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
	// Observe, when set, is called for every entry copied, in the
	// order of the Digest stream (the tree's directory first, as "."),
	// with a status that vouches for its content: a tree found later
	// with the same statuses (change times included, which any change
	// moves forward) holds what was copied, and hashed when Digest is
	// set. That is a stat signature of the tree as it was read, taken
	// without walking it again (hostfs.ArchiveOptions.Observe says which
	// status is taken when).
	Observe func(rel string, st EntryStat)
}

// EntryStat is what a tree copy observed of one entry: its type and
// permission bits, size, modification and change times (nanoseconds since
// the epoch), inode and device.
type EntryStat struct {
	Mode         uint32
	Size         int64
	Mtime, Ctime int64
	Ino, Dev     uint64
}
