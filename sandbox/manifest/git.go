//go:build unix

package manifest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

var ownerName = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// gitURL turns a git_repo repo into a URL: "owner/name" is a GitHub
// repository; anything with a ":" (a URL or scp-like address) or starting
// with "/" (a local path) is used as it is.
func gitURL(e Entry) (string, error) {
	r := e.Repo
	switch {
	case strings.Contains(r, ":") || strings.HasPrefix(r, "/"):
		return r, nil
	case ownerName.MatchString(r):
		return "https://github.com/" + strings.TrimSuffix(r, ".git") + ".git", nil
	}
	return "", fmt.Errorf("manifest entry git_repo %q: repo %q is neither owner/name nor a URL; write e.g. \"openai/openai-agents-python\" or \"https://host/path.git\"", e.Path, r)
}

func gitBinary(e Entry) (string, error) {
	g, err := exec.LookPath("git")
	if err != nil {
		return "", fmt.Errorf("manifest entry git_repo %q: git is not installed or not on PATH; install git (e.g. apt-get install git) or replace the entry with a local_dir", e.Path)
	}
	return g, nil
}

// runGit runs git with prompts disabled, returning stdout.
func runGit(ctx context.Context, git, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, git, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "LC_ALL=C")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return out.Bytes(), &gitError{args: args, err: err, stderr: msg}
	}
	return out.Bytes(), nil
}

type gitError struct {
	args   []string
	err    error
	stderr string
}

func (g *gitError) Error() string {
	s := "git " + g.args[0] + ": " + g.err.Error()
	if g.stderr != "" {
		s += ": " + g.stderr
	}
	return s
}

func (g *gitError) Unwrap() error { return g.err }

// gitResolve asks the remote which commit ref names, without cloning.
// The ref may be a branch, a tag, a full ref name or HEAD ("" = HEAD).
func gitResolve(ctx context.Context, e Entry, url string) (string, error) {
	git, err := gitBinary(e)
	if err != nil {
		return "", err
	}
	ref := e.Ref
	if ref == "" {
		ref = "HEAD"
	}
	out, err := runGit(ctx, git, "", "ls-remote", "--", url, ref, ref+"^{}")
	if err != nil {
		return "", fmt.Errorf("manifest entry git_repo %q: cannot reach %s: %w; check the repo name and your network or credentials", e.Path, url, err)
	}
	want := []string{ref, "refs/heads/" + ref, "refs/tags/" + ref + "^{}", "refs/tags/" + ref}
	found := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		sha, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok {
			found[name] = sha
		}
	}
	for _, w := range want {
		if sha, ok := found[w]; ok {
			return sha, nil
		}
	}
	return "", fmt.Errorf("manifest entry git_repo %q: ref %q not found in %s; use an existing branch or tag name", e.Path, e.Ref, url)
}

// applyGitRepo shallow-clones the repository on the host and copies it
// (or its subpath), without .git, into the workspace as a tar stream.
func applyGitRepo(ctx context.Context, sb sandbox.Sandbox, e Entry) (string, error) {
	git, err := gitBinary(e)
	if err != nil {
		return "", err
	}
	url, err := gitURL(e)
	if err != nil {
		return "", err
	}
	if _, err := gitResolve(ctx, e, url); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "agentctl-git-*")
	if err != nil {
		return "", fmt.Errorf("manifest entry git_repo %q: %w", e.Path, err)
	}
	defer os.RemoveAll(tmp)
	dst := filepath.Join(tmp, "repo")
	args := []string{"-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1", "--no-tags", "--single-branch"}
	if e.Ref != "" && e.Ref != "HEAD" {
		args = append(args, "--branch", strings.TrimPrefix(strings.TrimPrefix(e.Ref, "refs/heads/"), "refs/tags/"))
	}
	args = append(args, "--", cloneURL(url), dst)
	if _, err := runGit(ctx, git, tmp, args...); err != nil {
		return "", fmt.Errorf("manifest entry git_repo %q: clone %s at %q: %w", e.Path, url, e.Ref, err)
	}
	head, err := runGit(ctx, git, dst, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("manifest entry git_repo %q: %w", e.Path, err)
	}
	commit := strings.TrimSpace(string(head))
	d, err := hostfs.OpenRoot(dst)
	if err != nil {
		return "", err
	}
	defer d.Close()
	sub := "."
	if e.Subpath != "" {
		sub, _ = sandbox.CheckEntryPath(e.Subpath)
		st, err := d.Stat(ctx, sub)
		if err != nil || !st.Mode.IsDir() {
			return "", fmt.Errorf("manifest entry git_repo %q: subpath %q is not a directory in %s at %s; check the subpath", e.Path, e.Subpath, url, commit[:min(12, len(commit))])
		}
	}
	exclude := func(rel string, isDir bool) bool { return sub == "." && rel == ".git" }
	err = copyInStream(ctx, sb, e.Path, func(w io.Writer) error {
		return hostfs.Archive(ctx, d, sub, w, hostfs.ArchiveOptions{Exclude: exclude})
	})
	if err != nil {
		return "", fmt.Errorf("manifest entry git_repo %q: copy into the workspace: %w", e.Path, err)
	}
	return gitDigest(e, url, commit), nil
}

// cloneURL makes a local path clone honour --depth (git ignores it for
// plain local paths).
func cloneURL(url string) string {
	if strings.HasPrefix(url, "/") {
		return "file://" + url
	}
	return url
}
