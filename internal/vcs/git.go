// Package vcs finds which version-control revision a configuration was
// read from, for the provenance of the results it produced.
package vcs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// GitCommit returns the commit checked out in the git repository that
// contains dir, or "" when dir is not in a git checkout, the repository
// has no commits, or neither git nor the repository files can be read. It
// never fails: provenance is best effort. The git command it runs is
// bounded by ctx and a few seconds.
func GitCommit(ctx context.Context, dir string) string {
	// git finds a repository through a .git in dir or a directory above
	// it, or through GIT_DIR: with neither there is none, and no git
	// process is started to say so.
	if os.Getenv("GIT_DIR") == "" && findDotGit(dir) == "" {
		return ""
	}
	if c := gitRevParse(ctx, dir); c != "" {
		return c
	}
	return readGitHead(dir)
}

func gitRevParse(ctx context.Context, dir string) string {
	git, err := exec.LookPath("git")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, git, "-C", dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if !isHexCommit(c) {
		return ""
	}
	return c
}

// readGitHead resolves HEAD by reading the repository files, for machines
// without git. It handles plain repositories and linked worktrees (.git
// file), loose and packed refs.
func readGitHead(dir string) string {
	gitPath := findDotGit(dir)
	if gitPath == "" {
		return ""
	}
	gitDir := gitPath
	if fi, err := os.Stat(gitPath); err != nil {
		return ""
	} else if !fi.IsDir() {
		data, err := os.ReadFile(gitPath)
		if err != nil {
			return ""
		}
		ref, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
		if !ok {
			return ""
		}
		gitDir = strings.TrimSpace(ref)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(filepath.Dir(gitPath), gitDir)
		}
	}
	return resolveHead(gitDir)
}

// findDotGit returns the .git (a directory, or a file naming one) in dir
// or the nearest directory above it, or "" when there is none.
func findDotGit(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for d := abs; ; d = filepath.Dir(d) {
		gitPath := filepath.Join(d, ".git")
		if _, err := os.Stat(gitPath); err == nil {
			return gitPath
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

func resolveHead(gitDir string) string {
	commonDir := gitDir
	if data, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(data))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		commonDir = c
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return ""
	}
	h := strings.TrimSpace(string(head))
	for range 5 { // follow at most a few symbolic refs
		ref, ok := strings.CutPrefix(h, "ref:")
		if !ok {
			if isHexCommit(h) {
				return h
			}
			return ""
		}
		ref = strings.TrimSpace(ref)
		if strings.Contains(ref, "..") {
			return ""
		}
		h = ""
		for _, base := range []string{gitDir, commonDir} {
			if data, err := os.ReadFile(filepath.Join(base, filepath.FromSlash(ref))); err == nil {
				h = strings.TrimSpace(string(data))
				break
			}
		}
		if h == "" {
			return packedRef(commonDir, ref)
		}
	}
	return ""
}

func packedRef(commonDir, ref string) string {
	data, err := os.ReadFile(filepath.Join(commonDir, "packed-refs"))
	if err != nil {
		return ""
	}
	for line := range bytes.Lines(data) {
		fields := strings.Fields(string(line))
		if len(fields) == 2 && fields[1] == ref && isHexCommit(fields[0]) {
			return fields[0]
		}
	}
	return ""
}

func isHexCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
