//go:build unix

package manifest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testfiles"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

func newHostDir(t *testing.T) *hostfs.HostDir {
	t.Helper()
	h, err := hostfs.NewHostDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func readWS(t *testing.T, h *hostfs.HostDir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Path(), filepath.FromSlash(p)))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func TestMaterializeEntryTypes(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	testfiles.WriteTree(t, src, map[string]string{
		"brief.md":                 "# Brief\n",
		"repo/main.go":             "package main\n",
		"repo/run.sh":              "#!/bin/sh\necho hi\n",
		"repo/node_modules/x/i.js": "junk",
		"repo/tmp/a.tmp":           "junk",
		"repo/build/out.o":         "junk",
		"repo/src/build/keep.txt":  "kept: build/ is anchored",
	})
	m := Manifest{
		Root: "/workspace",
		Entries: []Entry{
			{Kind: EntryFile, Path: "data/sales.csv", Content: []byte("quarter,revenue\nQ1,3200000\n")},
			{Kind: EntryFile, Path: "bin/go.sh", Content: []byte("#!/bin/sh\n"), Mode: 0o755},
			{Kind: EntryDir, Path: "output"},
			{Kind: EntryLocalFile, Path: "brief.md", Source: filepath.Join(src, "brief.md")},
			{Kind: EntryLocalDir, Path: "repo", Source: filepath.Join(src, "repo"), Exclude: []string{"node_modules", "*.tmp", "/build"}},
		},
		Env: map[string]string{"REGION": "eu"},
	}
	h := newHostDir(t)
	res, err := Materialize(ctx, h, m, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, h, "data/sales.csv"); got != "quarter,revenue\nQ1,3200000\n" {
		t.Errorf("file = %q", got)
	}
	if st, _ := os.Stat(filepath.Join(h.Path(), "bin/go.sh")); st == nil || st.Mode().Perm() != 0o755 {
		t.Errorf("bin/go.sh mode: %v", st)
	}
	if st, err := os.Stat(filepath.Join(h.Path(), "output")); err != nil || !st.IsDir() {
		t.Errorf("output dir: %v", err)
	}
	if got := readWS(t, h, "brief.md"); got != "# Brief\n" {
		t.Errorf("local_file = %q", got)
	}
	if got := readWS(t, h, "repo/main.go"); got != "package main\n" {
		t.Errorf("local_dir main.go = %q", got)
	}
	if st, _ := os.Stat(filepath.Join(h.Path(), "repo/run.sh")); st == nil || st.Mode().Perm() != 0o755 {
		t.Errorf("repo/run.sh lost its exec bit: %v", st)
	}
	for _, p := range []string{"repo/node_modules", "repo/tmp/a.tmp", "repo/build"} {
		if _, err := os.Lstat(filepath.Join(h.Path(), p)); err == nil {
			t.Errorf("%s was not excluded", p)
		}
	}
	if got := readWS(t, h, "repo/src/build/keep.txt"); !strings.HasPrefix(got, "kept") {
		t.Errorf("anchored exclude removed a nested build dir: %q", got)
	}
	want := []string{"data/sales.csv", "bin/go.sh", "output", "brief.md", "repo"}
	if diff := cmp.Diff(want, res.Applied); diff != "" {
		t.Errorf("Applied (-want +got):\n%s", diff)
	}
	if len(res.Digests) != 5 {
		t.Errorf("digests: %v", res.Digests)
	}

	// Digests computed without writing match the applied ones.
	pre, err := EntryDigests(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res.Digests, pre); diff != "" {
		t.Errorf("EntryDigests differ from Materialize (-apply +plan):\n%s", diff)
	}

	// No change: nothing is applied.
	res2, err := Materialize(ctx, h, m, res.Digests, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res2.Applied) != 0 || len(res2.Unchanged) != 5 {
		t.Errorf("unchanged manifest applied %v", res2.Applied)
	}

	// Change one source file, one inline file, drop an entry.
	testfiles.WriteTree(t, src, map[string]string{"repo/main.go": "package main // v2\n"})
	os.WriteFile(filepath.Join(h.Path(), "data/sales.csv"), []byte("edited by the agent"), 0o644)
	m2 := m
	m2.Entries = slices.Clone(m.Entries)
	m2.Entries[0].Content = []byte("quarter,revenue\nQ2,1\n")
	m2.Entries = slices.Delete(m2.Entries, 3, 4) // brief.md
	res3, err := Materialize(ctx, h, m2, res.Digests, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"data/sales.csv", "repo"}, res3.Applied); diff != "" {
		t.Errorf("update Applied (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"brief.md"}, res3.Removed); diff != "" {
		t.Errorf("Removed (-want +got):\n%s", diff)
	}
	if got := readWS(t, h, "brief.md"); got != "# Brief\n" {
		t.Errorf("removed entry's file should be left in place, got %q", got)
	}
	if got := readWS(t, h, "repo/main.go"); got != "package main // v2\n" {
		t.Errorf("changed local_dir not re-copied: %q", got)
	}
	if Digest(m, res.Digests) == Digest(m2, res3.Digests) {
		t.Error("manifest digest did not change")
	}
}

func TestManifestDigest(t *testing.T) {
	m := Manifest{Root: "/w", Entries: []Entry{{Kind: EntryFile, Path: "a", Content: []byte("x")}}, Env: map[string]string{"A": "1"}, EphemeralEnv: map[string]string{"TOKEN": "s3cret"}}
	base := Digest(m, nil)
	m2 := m
	m2.EphemeralEnv = map[string]string{"TOKEN": "other"}
	if Digest(m2, nil) != base {
		t.Error("ephemeral env changed the digest")
	}
	m3 := m
	m3.Env = map[string]string{"A": "2"}
	if Digest(m3, nil) == base {
		t.Error("env did not change the digest")
	}
	m4 := m
	m4.Entries = []Entry{{Kind: EntryFile, Path: "a", Content: []byte("y")}}
	if Digest(m4, nil) == base {
		t.Error("file content did not change the digest")
	}
}

func TestMaterializeOrderAndOverlap(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	testfiles.WriteTree(t, src, map[string]string{"cfg/settings.json": "from dir", "cfg/other": "o"})
	m := Manifest{Entries: []Entry{
		{Kind: EntryLocalDir, Path: "cfg", Source: filepath.Join(src, "cfg")},
		{Kind: EntryFile, Path: "cfg/settings.json", Content: []byte("from file")},
		{Kind: EntryFile, Path: "x/1", Content: []byte("1")},
		{Kind: EntryFile, Path: "x/2", Content: []byte("2")},
	}}
	for i := range 5 { // the later, overlapping entry always wins
		h := newHostDir(t)
		res, err := Materialize(ctx, h, m, nil, 4)
		if err != nil {
			t.Fatal(err)
		}
		if got := readWS(t, h, "cfg/settings.json"); got != "from file" {
			t.Fatalf("run %d: declaration order not kept: %q", i, got)
		}
		// Changing the directory re-applies the file declared after it.
		testfiles.WriteTree(t, src, map[string]string{"cfg/other": "changed"})
		res2, err := Materialize(ctx, h, m, res.Digests, 4)
		if err != nil {
			t.Fatal(err)
		}
		if got := readWS(t, h, "cfg/settings.json"); got != "from file" {
			t.Fatalf("update clobbered the later entry: %q", got)
		}
		if !slices.Contains(res2.Applied, "cfg/settings.json") || slices.Contains(res2.Applied, "x/1") {
			t.Errorf("update applied %v", res2.Applied)
		}
		testfiles.WriteTree(t, src, map[string]string{"cfg/other": "o"})
	}
}

func TestMaterializeRefusals(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	testfiles.WriteTree(t, src, map[string]string{"d/a.txt": "a", "real.txt": "r"})
	os.Symlink("/etc/passwd", filepath.Join(src, "d", "passwd"))
	os.Symlink("real.txt", filepath.Join(src, "link.txt"))
	os.Symlink("d", filepath.Join(src, "linkdir"))
	tests := []struct {
		name string
		e    Entry
		want string
	}{
		{"symlink inside local_dir", Entry{Kind: EntryLocalDir, Path: "d", Source: filepath.Join(src, "d")}, "passwd is a symlink"},
		{"local_dir source is a symlink", Entry{Kind: EntryLocalDir, Path: "d", Source: filepath.Join(src, "linkdir")}, "is a symlink"},
		{"local_file source is a symlink", Entry{Kind: EntryLocalFile, Path: "f", Source: filepath.Join(src, "link.txt")}, "is a symlink"},
		{"local_file source missing", Entry{Kind: EntryLocalFile, Path: "f", Source: filepath.Join(src, "nope")}, "no such file"},
		{"local_dir source is a file", Entry{Kind: EntryLocalDir, Path: "d", Source: filepath.Join(src, "real.txt")}, "not a directory"},
		{"absolute entry path", Entry{Kind: EntryFile, Path: "/etc/x"}, "absolute"},
		{"dotdot entry path", Entry{Kind: EntryFile, Path: "a/../../x"}, `".."`},
		{"bad exclude", Entry{Kind: EntryLocalDir, Path: "d", Source: filepath.Join(src, "d"), Exclude: []string{"[z-a"}}, "exclude pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHostDir(t)
			_, err := Materialize(ctx, h, Manifest{Entries: []Entry{tt.e}}, nil, 1)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	h := newHostDir(t)
	_, err := Materialize(ctx, h, Manifest{Entries: []Entry{{Kind: EntryDir, Path: "a"}, {Kind: EntryFile, Path: "./a"}}}, nil, 1)
	if err == nil || !strings.Contains(err.Error(), "same path") {
		t.Errorf("duplicate paths: %v", err)
	}
}

// gitRepo makes a bare repository with a branch "main" (two commits), a
// branch "dev" and a tag "v1", using the git CLI.
func gitRepo(t *testing.T) (bare string, commits map[string]string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git is not installed; git_repo materialization needs the git CLI")
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	bare = filepath.Join(dir, "repo.git")
	run := func(d string, args ...string) string {
		t.Helper()
		return testfiles.Git(t, d, args...)
	}
	run(dir, "init", "-q", "--bare", "-b", "main", bare)
	run(dir, "init", "-q", "-b", "main", work)
	testfiles.WriteTree(t, work, map[string]string{"README.md": "v1\n", "pkg/lib/lib.go": "package lib\n", "pkg/tool.sh": "#!/bin/sh\n"})
	run(work, "add", ".")
	run(work, "commit", "-q", "-m", "one")
	commits = map[string]string{"v1": run(work, "rev-parse", "HEAD")}
	run(work, "tag", "-a", "v1", "-m", "v1")
	testfiles.WriteTree(t, work, map[string]string{"README.md": "v2\n"})
	run(work, "commit", "-q", "-am", "two")
	commits["main"] = run(work, "rev-parse", "HEAD")
	run(work, "checkout", "-q", "-b", "dev")
	testfiles.WriteTree(t, work, map[string]string{"README.md": "dev\n"})
	run(work, "commit", "-q", "-am", "dev")
	commits["dev"] = run(work, "rev-parse", "HEAD")
	run(work, "push", "-q", bare, "main", "dev", "v1")
	return bare, commits
}

func TestMaterializeGitRepo(t *testing.T) {
	ctx := context.Background()
	bare, commits := gitRepo(t)
	h := newHostDir(t)
	m := Manifest{Entries: []Entry{
		{Kind: EntryGitRepo, Path: "sdk", Repo: "file://" + bare, Ref: "main"},
		{Kind: EntryGitRepo, Path: "old", Repo: bare, Ref: "v1", Subpath: "pkg"},
		{Kind: EntryGitRepo, Path: "devtree", Repo: bare, Ref: "dev"},
	}}
	res, err := Materialize(ctx, h, m, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, h, "sdk/README.md"); got != "v2\n" {
		t.Errorf("main README = %q", got)
	}
	if _, err := os.Stat(filepath.Join(h.Path(), "sdk/.git")); err == nil {
		t.Error(".git was copied into the workspace")
	}
	if got := readWS(t, h, "old/lib/lib.go"); got != "package lib\n" {
		t.Errorf("subpath at tag: %q", got)
	}
	if st, _ := os.Stat(filepath.Join(h.Path(), "old/tool.sh")); st == nil || st.Mode().Perm() != 0o755 {
		t.Errorf("tool.sh mode: %v", st)
	}
	if got := readWS(t, h, "devtree/README.md"); got != "dev\n" {
		t.Errorf("dev README = %q", got)
	}
	// The digest names the resolved commit: unchanged refs are skipped.
	d, err := EntryDigest(ctx, m.Entries[0])
	if err != nil || d != res.Digests["sdk"] {
		t.Errorf("EntryDigest = %s, %v; Materialize recorded %s", d, err, res.Digests["sdk"])
	}
	e := m.Entries[0]
	e.Path = "sdk"
	if gitDigest(e, "file://"+bare, commits["main"]) != d {
		t.Error("digest does not follow repo+ref+commit")
	}
	res2, err := Materialize(ctx, h, m, res.Digests, 3)
	if err != nil || len(res2.Applied) != 0 {
		t.Errorf("unchanged git entries re-applied: %v, %v", res2.Applied, err)
	}

	for _, tt := range []struct {
		name string
		e    Entry
		want string
	}{
		{"missing ref", Entry{Kind: EntryGitRepo, Path: "x", Repo: bare, Ref: "no-such-branch"}, `ref "no-such-branch" not found`},
		{"missing repo", Entry{Kind: EntryGitRepo, Path: "x", Repo: bare + "-nope", Ref: "main"}, "cannot reach"},
		{"missing subpath", Entry{Kind: EntryGitRepo, Path: "x", Repo: bare, Ref: "main", Subpath: "nope"}, `subpath "nope" is not a directory`},
		{"bad repo name", Entry{Kind: EntryGitRepo, Path: "x", Repo: "just-a-name"}, "neither owner/name nor a URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Materialize(ctx, newHostDir(t), Manifest{Entries: []Entry{tt.e}}, nil, 1)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("git missing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := Materialize(ctx, newHostDir(t), Manifest{Entries: []Entry{{Kind: EntryGitRepo, Path: "x", Repo: bare, Ref: "main"}}}, nil, 1)
		if err == nil || !strings.Contains(err.Error(), "git is not installed") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestGitURL(t *testing.T) {
	for repo, want := range map[string]string{
		"openai/openai-agents-python": "https://github.com/openai/openai-agents-python.git",
		"owner/name.git":              "https://github.com/owner/name.git",
		"https://gitlab.com/a/b.git":  "https://gitlab.com/a/b.git",
		"git@github.com:a/b.git":      "git@github.com:a/b.git",
		"/srv/git/repo.git":           "/srv/git/repo.git",
		"file:///tmp/x.git":           "file:///tmp/x.git",
	} {
		got, err := gitURL(Entry{Repo: repo})
		if err != nil || got != want {
			t.Errorf("gitURL(%q) = %q, %v; want %q", repo, got, err, want)
		}
	}
}

func TestMaterializeFileModeUpdate(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	m := Manifest{Entries: []Entry{{Kind: EntryFile, Path: "run.sh", Content: []byte("echo 1\n")}}}
	res, err := Materialize(ctx, h, m, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	m.Entries[0].Mode = 0o755
	if _, err := Materialize(ctx, h, m, res.Digests, 1); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(h.Path(), "run.sh")); st == nil || st.Mode().Perm() != 0o755 {
		t.Errorf("mode change not applied: %v", st)
	}
}

func newHostDirAt(t *testing.T, dir string) *hostfs.HostDir {
	t.Helper()
	h, err := hostfs.NewHostDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}
