package tools

import (
	"errors"

	"github.com/agentctl/agentctl/sandbox"
)

// toolPath applies the workspace path policy (sandbox.CleanPath) to a path
// a model gave a tool and returns it workspace-relative ("" for the root
// itself). Unlike CleanPath it refuses an empty path, which from a model
// is a mistake rather than a way to name the root.
func toolPath(root, p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty: give a path relative to the workspace root")
	}
	rel, err := sandbox.CleanPath(root, p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", nil
	}
	return rel, nil
}
