package vcs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testenv"
)

func TestGitCommit(t *testing.T) {
	outside := t.TempDir()
	if findDotGit(outside) != "" {
		testenv.Missing(t, "a temporary directory outside any git checkout (%s is inside one; set TMPDIR elsewhere)", outside)
	}
	if got := GitCommit(t.Context(), outside); got != "" {
		t.Fatalf("GitCommit outside a repository = %q", got)
	}
	// Outside any checkout no git process is started: a git on PATH
	// that leaves a mark is never run.
	fake, mark := t.TempDir(), filepath.Join(t.TempDir(), "ran")
	os.WriteFile(filepath.Join(fake, "git"), []byte("#!/bin/sh\ntouch "+mark+"\nexit 1\n"), 0o755)
	t.Setenv("PATH", fake+string(os.PathListSeparator)+os.Getenv("PATH"))
	if got := GitCommit(t.Context(), outside); got != "" {
		t.Fatalf("GitCommit outside a repository = %q", got)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("GitCommit ran git outside any checkout")
	}
	t.Setenv("GIT_DIR", filepath.Join(outside, "elsewhere.git"))
	GitCommit(t.Context(), outside)
	if _, err := os.Stat(mark); err != nil {
		t.Fatal("GitCommit did not ask git with GIT_DIR set")
	}
	os.Unsetenv("GIT_DIR")
	os.Remove(filepath.Join(fake, "git"))
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git is not installed")
	}
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	sub := filepath.Join(repo, "pipelines", "review")
	os.MkdirAll(sub, 0o755)
	if got := GitCommit(t.Context(), sub); got != "" {
		t.Fatalf("GitCommit in a repository without commits = %q", got)
	}
	os.WriteFile(filepath.Join(sub, "main.hcl"), []byte("x"), 0o644)
	git("add", ".")
	git("commit", "-q", "-m", "one")
	want := git("rev-parse", "HEAD")
	if got := GitCommit(t.Context(), sub); got != want {
		t.Fatalf("GitCommit = %q, want %q", got, want)
	}
	// Without git, the repository files give the same answer: loose ref,
	// packed ref, detached HEAD and a linked worktree.
	if got := readGitHead(sub); got != want {
		t.Fatalf("readGitHead (loose ref) = %q, want %q", got, want)
	}
	git("pack-refs", "--all")
	if got := readGitHead(sub); got != want {
		t.Fatalf("readGitHead (packed ref) = %q, want %q", got, want)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	git("worktree", "add", "-q", "-b", "other", wt)
	if got := readGitHead(wt); got != want {
		t.Fatalf("readGitHead (worktree) = %q, want %q", got, want)
	}
	git("checkout", "-q", "--detach")
	if got := readGitHead(sub); got != want {
		t.Fatalf("readGitHead (detached) = %q, want %q", got, want)
	}
}
