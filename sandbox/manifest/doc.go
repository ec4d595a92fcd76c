// Package manifest materializes a workspace manifest (files,
// directories, copies of host files and directories, git checkouts) into
// a sandbox, and computes the digests plan compares to tell which
// entries changed.
package manifest
