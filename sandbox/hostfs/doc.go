// Package hostfs is the sandbox layer for workspaces that are host
// directories: Dir resolves every path beneath the workspace root
// (openat2 with RESOLVE_BENEATH, or os.Root where the kernel lacks it),
// Extract and Archive move tar streams in and out of it safely
// (SanitizeTar applies the same rules to a stream another provider
// extracts), RemoveAll deletes deep or unwritable trees, HostDir is an
// unisolated sandbox on a host directory and RunProcess the host process
// runner under it and the local provider.
package hostfs
