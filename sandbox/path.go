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
// the root through ".." (at any point: "a/../../x" is refused even though
// it might come back), and paths holding NUL bytes or backslashes, are
// refused with an error wrapping ErrPathEscape that names p.
//
// root may be empty, in which case absolute paths are refused. A root of
// "/" accepts every absolute path (the whole file system is the
// workspace).
func CleanPath(root, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q: contains a NUL byte: %w", p, ErrPathEscape)
	}
	if strings.IndexByte(p, '\\') >= 0 {
		return "", fmt.Errorf("path %q: contains a backslash; use forward slashes: %w", p, ErrPathEscape)
	}
	var rootEl []string
	if strings.HasPrefix(p, "/") {
		if root == "" {
			return "", fmt.Errorf("absolute path %q is not allowed; use a path relative to the workspace: %w", p, ErrPathEscape)
		}
		rootEl = []string{}
		if r := path.Clean("/" + root); r != "/" {
			rootEl = strings.Split(r[1:], "/")
		}
	}
	// Walk the elements: once inside the root, a ".." that climbs above
	// it is refused even if later elements come back.
	// match counts the leading stack elements equal to rootEl's, so each
	// element costs O(1) however long the root is.
	stack := make([]string, 0, 16)
	match := 0
	inside := len(rootEl) == 0
	for _, e := range strings.Split(p, "/") {
		switch e {
		case "", ".":
			continue
		case "..":
			if inside && len(stack) <= len(rootEl) {
				return "", fmt.Errorf("path %q leaves the workspace through \"..\": %w", p, ErrPathEscape)
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			match = min(match, len(stack))
		default:
			if i := len(stack); match == i && i < len(rootEl) && rootEl[i] == e {
				match++
			}
			stack = append(stack, e)
		}
		if !inside && match == len(rootEl) {
			inside = true
		}
	}
	if !inside || match < len(rootEl) {
		return "", fmt.Errorf("path %q is outside the workspace root %s; use a path under it or a relative path: %w", p, "/"+strings.Join(rootEl, "/"), ErrPathEscape)
	}
	if len(stack) == len(rootEl) {
		return ".", nil
	}
	return strings.Join(stack[len(rootEl):], "/"), nil
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
