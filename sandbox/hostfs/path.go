package hostfs

import (
	"path"
	"strings"
)

// relJoin joins workspace-relative paths, treating "" and "." as the root.
func relJoin(a, b string) string {
	if a == "" || a == "." {
		if b == "" {
			return "."
		}
		return path.Clean(b)
	}
	if b == "" || b == "." {
		return path.Clean(a)
	}
	return path.Clean(a + "/" + b)
}

// symlinkStaysInside reports whether a symlink at linkPath (workspace-
// relative) with the given target resolves, lexically, inside the
// workspace. Absolute targets are refused: they mean different things on
// the host and inside a sandbox.
func symlinkStaysInside(linkPath, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.IndexByte(target, 0) >= 0 {
		return false
	}
	dir := path.Dir(linkPath)
	c := path.Clean(dir + "/" + target)
	return c != ".." && !strings.HasPrefix(c, "../")
}
