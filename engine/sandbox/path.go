package sandbox

import (
	"fmt"
	"path"
	"strings"
)

// CleanPath applies the workspace path policy to p, a path given by a tool
// call or a manifest entry, for a workspace whose root (inside the
// sandbox) is root, e.g. /workspace. It is a lexical check only: symlinks
// are handled by the resolver (Dir, or the provider) when the path is used.
//
// A relative p resolves under the root. An absolute p is accepted only
// when it is the root or inside it. The result is workspace-relative,
// slash-separated and clean; "." means the root itself. Paths that leave
// the root through "..", and paths holding NUL bytes or backslashes, are
// refused with an error wrapping ErrPathEscape that names p.
//
// root may be empty, in which case absolute paths are refused.
func CleanPath(root, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q: contains a NUL byte: %w", p, ErrPathEscape)
	}
	if strings.IndexByte(p, '\\') >= 0 {
		return "", fmt.Errorf("path %q: contains a backslash; use forward slashes: %w", p, ErrPathEscape)
	}
	if strings.HasPrefix(p, "/") {
		r := path.Clean("/" + root)
		if root == "" || r == "/" {
			return "", fmt.Errorf("path %q: absolute paths are not allowed; use a path relative to the workspace: %w", p, ErrPathEscape)
		}
		c := path.Clean(p)
		if c == r {
			return ".", nil
		}
		if !strings.HasPrefix(c, r+"/") {
			return "", fmt.Errorf("path %q is outside the workspace %s; use a path under it or a relative path: %w", p, r, ErrPathEscape)
		}
		// Refuse ".." even when cleaning would bring it back inside, so
		// "/workspace/../workspace/x" is not accepted by accident of spelling.
		if hasDotDot(p) {
			return "", fmt.Errorf("path %q: \"..\" is not allowed in absolute paths: %w", p, ErrPathEscape)
		}
		return c[len(r)+1:], nil
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the workspace through \"..\": %w", p, ErrPathEscape)
	}
	return c, nil
}

// hasDotDot reports whether any slash-separated element of p is "..".
func hasDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

// CheckEntryPath is the stricter policy for manifest entry paths and tar
// member names: relative, no ".." element at all, no NUL or backslash, not
// empty. It returns the clean slash-separated path.
func CheckEntryPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("empty path: %w", ErrPathEscape)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("path %q: contains a NUL byte: %w", p, ErrPathEscape)
	case strings.IndexByte(p, '\\') >= 0:
		return "", fmt.Errorf("path %q: contains a backslash; use forward slashes: %w", p, ErrPathEscape)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path %q is absolute; use a path relative to the workspace root: %w", p, ErrPathEscape)
	case hasDotDot(p):
		return "", fmt.Errorf("path %q contains a \"..\" element: %w", p, ErrPathEscape)
	}
	return path.Clean(p), nil
}

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
