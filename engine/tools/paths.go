package tools

import (
	"fmt"
	"path"
	"strings"

	"github.com/agentctl/agentctl/engine/sandbox"
)

// cleanPath checks a path a model gave a tool and returns it
// workspace-relative with forward slashes ("" for the root itself).
// Relative paths resolve under the workspace root; absolute paths are
// accepted only when they lie inside root (root "" refuses every absolute
// path). A path that leaves the workspace, or that contains NUL or a
// backslash, is refused. This is a lexical check only: the sandbox's file
// methods still refuse to follow symlinks out of the workspace.
func cleanPath(root, p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("path is empty: give a path relative to the workspace root")
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q contains a NUL byte: %w", p, sandbox.ErrPathEscape)
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("path %q contains a backslash: use forward slashes: %w", p, sandbox.ErrPathEscape)
	}
	if strings.HasPrefix(p, "/") {
		if root == "" {
			return "", fmt.Errorf("absolute path %q is not allowed: use a path relative to the workspace root: %w", p, sandbox.ErrPathEscape)
		}
		r := path.Clean(root)
		c := path.Clean(p)
		if c == r {
			return "", nil
		}
		if r == "/" {
			return strings.TrimPrefix(c, "/"), nil
		}
		if !strings.HasPrefix(c, r+"/") {
			return "", fmt.Errorf("path %q is outside the workspace root %s: use a path inside it: %w", p, r, sandbox.ErrPathEscape)
		}
		return c[len(r)+1:], nil
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the workspace: use a path inside the workspace root: %w", p, sandbox.ErrPathEscape)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}
