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
	"sync"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

var ownerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`) })

// gitURL turns a git_repo repo into a URL: "owner/name" is a GitHub
// repository; anything with a ":" (a URL or scp-like address) or starting
// with "/" (a local path) is used as it is.
func gitURL(e Entry) (string, error) {
	r := e.Repo
	switch {
	case strings.Contains(r, ":") || strings.HasPrefix(r, "/"):
		return r, nil
	case ownerName().MatchString(r):
		return "https://github.com/" + strings.TrimSuffix(r, ".git") + ".git", nil
	}
	return "", fmt.Errorf("%s: repo %q is neither owner/name nor a URL; write e.g. \"openai/openai-agents-python\" or \"https://host/path.git\"", gitLabel(e), r)
}

func gitBinary(e Entry) (string, error) {
	g, err := exec.LookPath("git")
	if err != nil {
		return "", fmt.Errorf("%s: git is not installed or not on PATH; install git (e.g. apt-get install git) or use a local directory instead", gitLabel(e))
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
		return "", fmt.Errorf("%s: cannot reach %s: %w; check the repo name and your network or credentials", gitLabel(e), url, err)
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
	return "", fmt.Errorf("%s: ref %q not found in %s; use an existing branch or tag name", gitLabel(e), e.Ref, url)
}

// gitLabel names a git_repo in messages.
func gitLabel(e Entry) string {
	if e.Label != "" {
		return e.Label
	}
	return fmt.Sprintf("manifest entry git_repo %q", e.Path)
}

// GitCheckout is a shallow clone of a git_repo on the host.
type GitCheckout struct {
	// Root is the clone; Sub the subpath within it ("." for all of it).
	Root   *hostfs.Dir
	Path   string
	Sub    string
	URL    string
	Commit string
	tmp    string
}

// Close removes the clone.
func (c *GitCheckout) Close() error {
	c.Root.Close()
	return os.RemoveAll(c.tmp)
}

// CloneGitRepo shallow-clones e's repository at e's ref on the host and
// checks e's subpath. The caller closes the checkout.
func CloneGitRepo(ctx context.Context, e Entry) (*GitCheckout, error) {
	git, err := gitBinary(e)
	if err != nil {
		return nil, err
	}
	url, err := gitURL(e)
	if err != nil {
		return nil, err
	}
	if _, err := gitResolve(ctx, e, url); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "agentctl-git-*")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gitLabel(e), err)
	}
	fail := func(err error) (*GitCheckout, error) {
		os.RemoveAll(tmp)
		return nil, err
	}
	dst := filepath.Join(tmp, "repo")
	args := []string{"-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1", "--no-tags", "--single-branch"}
	if e.Ref != "" && e.Ref != "HEAD" {
		args = append(args, "--branch", strings.TrimPrefix(strings.TrimPrefix(e.Ref, "refs/heads/"), "refs/tags/"))
	}
	args = append(args, "--", cloneURL(url), dst)
	if _, err := runGit(ctx, git, tmp, args...); err != nil {
		return fail(fmt.Errorf("%s: clone %s at %q: %w", gitLabel(e), url, e.Ref, err))
	}
	head, err := runGit(ctx, git, dst, "rev-parse", "HEAD")
	if err != nil {
		return fail(fmt.Errorf("%s: %w", gitLabel(e), err))
	}
	commit := strings.TrimSpace(string(head))
	d, err := hostfs.OpenRoot(dst)
	if err != nil {
		return fail(err)
	}
	sub := "."
	if e.Subpath != "" {
		sub, _ = sandbox.CheckEntryPath(e.Subpath)
		st, err := d.Stat(ctx, sub)
		if err != nil || !st.Mode.IsDir() {
			d.Close()
			return fail(fmt.Errorf("%s: subpath %q is not a directory in %s at %s; check the subpath", gitLabel(e), e.Subpath, url, commit[:min(12, len(commit))]))
		}
	}
	return &GitCheckout{Root: d, Path: dst, Sub: sub, URL: url, Commit: commit, tmp: tmp}, nil
}

// applyGitRepo shallow-clones the repository on the host and copies it
// (or its subpath), without .git, into the workspace: directly where the
// sandbox takes host trees, as a tar stream otherwise.
func applyGitRepo(ctx context.Context, sb sandbox.Sandbox, e Entry) (string, error) {
	co, err := CloneGitRepo(ctx, e)
	if err != nil {
		return "", err
	}
	defer co.Close()
	exclude := func(rel string, isDir bool) bool { return co.Sub == "." && rel == ".git" }
	if tc, ok := sb.(sandbox.HostTreeCopier); ok {
		err = tc.CopyTreeIn(ctx, e.Path, sandbox.HostTree{Root: co.Path, Dir: co.Sub, Exclude: exclude})
	} else {
		err = copyInStream(ctx, sb, e.Path, func(w io.Writer) error {
			return hostfs.Archive(ctx, co.Root, co.Sub, w, hostfs.ArchiveOptions{Exclude: exclude})
		})
	}
	if err != nil {
		return "", fmt.Errorf("%s: copy into the workspace: %w", gitLabel(e), err)
	}
	return gitDigest(e, co.URL, co.Commit), nil
}

// cloneURL makes a local path clone honour --depth (git ignores it for
// plain local paths).
func cloneURL(url string) string {
	if strings.HasPrefix(url, "/") {
		return "file://" + url
	}
	return url
}
