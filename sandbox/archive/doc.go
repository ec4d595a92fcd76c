// Package archive writes and restores workspace snapshot files: plain
// tar files on the host, written atomically and within the limits a
// restore accepts, restored through a sandbox's own safe CopyIn, and
// scanned for sensitive values (SensitiveMembers).
package archive
