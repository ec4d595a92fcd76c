package sandboxtest

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/manifest"
)

// testManifest: every manifest entry type is written where it belongs,
// its environment reaches commands (the ephemeral part scrubbed from
// what they return), an unchanged manifest writes nothing again, and a
// changed entry replaces a symlink a command left at its path instead of
// writing through it.
func (s *suite) testManifest(t *testing.T) {
	sb, spec := s.create(t, sandbox.Spec{})
	c := ctx(t)
	host := t.TempDir()
	testfiles.WriteTree(t, host, map[string]string{
		"brief.md":                        "the brief\n",
		"project/src/app.txt":             "name demo\n",
		"project/run.sh":                  "echo project-ran\n",
		"project/node_modules/dep/i.js":   "excluded\n",
		"project/scratch.tmp":             "excluded\n",
		"project/docs/node_modules/x.txt": "excluded too\n",
	})
	m := manifest.Manifest{
		Root: spec.Root,
		Entries: []manifest.Entry{
			{Kind: manifest.EntryFile, Path: "data/input.csv", Content: []byte("a,b\n1,2\n")},
			{Kind: manifest.EntryFile, Path: "bin/tool.sh", Content: []byte("echo tool-ran\n"), Mode: 0o755},
			{Kind: manifest.EntryDir, Path: "output"},
			{Kind: manifest.EntryLocalFile, Path: "brief.md", Source: filepath.Join(host, "brief.md")},
			{Kind: manifest.EntryLocalDir, Path: "project", Source: filepath.Join(host, "project"), Exclude: []string{"node_modules", "*.tmp"}},
		},
	}
	want := "a,b\n1,2\n" + "the brief\n" + "name demo\n" + "tool-ran\n" + "project-ran\n" + "dir-ok\n" +
		"project project/docs project/run.sh project/src project/src/app.txt \n"
	script := `cat data/input.csv brief.md project/src/app.txt && bin/tool.sh && sh project/run.sh && test -d output && echo dir-ok && find project | sort | tr '\n' ' ' && echo`
	if repo := bareRepo(t); repo != "" {
		m.Entries = append(m.Entries, manifest.Entry{Kind: manifest.EntryGitRepo, Path: "vendor/lib", Repo: "file://" + repo, Ref: "main"})
		want += "lib from git\nno-git-dir\n"
		script += " && cat vendor/lib/README.md && (test -e vendor/lib/.git || echo no-git-dir)"
	}
	res, err := manifest.Materialize(c, sb, m, nil, 0)
	if err != nil {
		t.Fatalf("materializing a manifest with every entry type: %v", err)
	}
	if got := sh(t, sb, "reading what the manifest wrote", script); got != want {
		t.Errorf("the manifest's entries are not in the workspace as declared:\n got %q\nwant %q", got, want)
	}
	if fi, err := sb.Stat(c, "bin/tool.sh"); err != nil || fi.Mode.Perm() != 0o755 {
		t.Errorf("an executable file entry has mode %v (%s), want 0755", fi.Mode, describe(err))
	}

	ws := &sandbox.Workspace{Sandbox: sb, Env: map[string]string{"REGION": "eu"}, EphemeralEnv: map[string]string{"DB_TOKEN": "tok-5e4f1d9a"},
		Scrub: sandbox.NewScrubber([]string{"tok-5e4f1d9a"})}
	out, err := ws.Exec(c, sandbox.ExecRequest{Shell: `echo "region=$REGION token=$DB_TOKEN length=${#DB_TOKEN}"`})
	if err != nil || string(out.Stdout) != "region=eu token=(sensitive) length=12\n" {
		t.Errorf("the manifest's env and ephemeral env did not reach a command, scrubbed: %q, %s", out.Stdout, describe(err))
	}

	again, err := manifest.Materialize(c, sb, m, res.Digests, 0)
	if err != nil || len(again.Applied) != 0 {
		t.Errorf("materializing an unchanged manifest wrote %v again (%s)", again.Applied, describe(err))
	}
	o := makeOutside(t, sb)
	sh(t, sb, "replacing a file entry with a symlink out", "rm data/input.csv && ln -s "+o.dir+"/s data/input.csv")
	m.Entries[0].Content = []byte("changed\n")
	changed, err := manifest.Materialize(c, sb, m, res.Digests, 0)
	if err != nil || !slices.Equal(changed.Applied, []string{"data/input.csv"}) {
		t.Errorf("materializing a manifest with one changed entry applied %v (%s), want just that entry", changed.Applied, describe(err))
	}
	if got, err := sb.ReadFile(c, "data/input.csv", 0); err != nil || string(got) != "changed\n" {
		t.Errorf("the changed file entry reads %q (%s)", got, describe(err))
	}
	o.check(t, sb, "a file entry written where a command left a symlink out of the workspace")
}

// bareRepo makes a bare git repository on this machine with one commit
// on main, for a git_repo entry; "" (and a log line) without git.
func bareRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Logf("git is not installed here: the git_repo entry is left out (%v)", err)
		return ""
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	testfiles.WriteTree(t, src, map[string]string{"README.md": "lib from git\n", "lib/code.txt": "code\n"})
	testfiles.Git(t, src, "init", "-q", "-b", "main")
	testfiles.Git(t, src, "add", ".")
	testfiles.Git(t, src, "commit", "-q", "-m", "init")
	testfiles.Git(t, base, "clone", "-q", "--bare", src, "lib.git")
	return filepath.Join(base, "lib.git")
}
