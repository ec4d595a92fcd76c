//go:build unix

package manifest

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// settle waits until the file system's change times have moved past
// every change made so far (milliseconds: they are coarser than the
// clock, which is why the racy window exists) and returns a clock for a
// DigestCache whose racy window ends there, as if the window had been
// waited out: what changed before is old enough to be remembered, what
// changes after is recent.
func settle(t *testing.T) func() time.Time {
	t.Helper()
	dir := t.TempDir()
	changeTime := func(name string) int64 {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return hostfs.EntryStat(&st).Ctime
	}
	first := changeTime("first")
	for {
		if tick := changeTime("tick"); tick > first {
			now := time.Unix(0, tick).Add(racyWindow)
			return func() time.Time { return now }
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDigestCache: an unchanged tree's digest comes from the cache (kept
// in its file across commands); a file changed with its size and mtime
// kept is still noticed (its change time moved); a tree changed within
// the racy window is not remembered.
func TestDigestCache(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "alpha", "sub/b.txt": "bravo", "skip/c.txt": "charlie"})
	e := Entry{Kind: EntryLocalDir, Path: "repo", Source: src, Exclude: []string{"skip/"}}
	m := Manifest{Entries: []Entry{e}}
	real, err := EntryDigests(ctx, m)
	if err != nil {
		t.Fatal(err)
	}

	// Just written: too recent to remember.
	cachePath := filepath.Join(t.TempDir(), "digests.json")
	m.DigestCache = OpenDigestCache(cachePath)
	if _, err := EntryDigests(ctx, m); err != nil {
		t.Fatal(err)
	}
	if len(m.DigestCache.entries) != 0 {
		t.Fatal("a tree written just now was remembered")
	}
	m.DigestCache.Now = settle(t)
	got, err := EntryDigests(ctx, m)
	if err != nil || got["repo"] != real["repo"] {
		t.Fatalf("digest %v, %v; want %v", got, err, real)
	}
	if err := m.DigestCache.Save(); err != nil {
		t.Fatal(err)
	}

	// Another command reads the cache file: a remembered digest is used
	// as long as the tree's signature holds (a marked digest shows it).
	c := OpenDigestCache(cachePath)
	key := cacheKey(Entry{Kind: EntryLocalDir, Path: "repo", Source: src, Exclude: []string{"skip/"}})
	hit, ok := c.entries[key]
	if !ok {
		t.Fatalf("the cache file lacks the entry: %v", c.entries)
	}
	hit.Digest = "blake3:remembered"
	c.entries[key] = hit
	m.DigestCache = c
	if got, _ := EntryDigests(ctx, m); got["repo"] != "blake3:remembered" {
		t.Fatalf("an unchanged tree was read again: %v", got)
	}
	// A state with SHA-256 digests does not take a BLAKE3 digest from
	// the cache (one cache serves the states beside a configuration).
	legacy := m
	legacy.Digests = digest.SHA256
	if got, _ := EntryDigests(ctx, legacy); !strings.HasPrefix(got["repo"], "sha256:") {
		t.Fatalf("a SHA-256 manifest got %v", got)
	}
	// An excluded file changes nothing.
	writeTree(t, src, map[string]string{"skip/c.txt": "CHARLIE"})
	if got, _ := EntryDigests(ctx, m); got["repo"] != "blake3:remembered" {
		t.Fatalf("a change under an excluded directory invalidated the digest: %v", got)
	}

	// Same size, same mtime, other content: the change time tells.
	st, err := os.Stat(filepath.Join(src, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, src, map[string]string{"a.txt": "ALPHA"})
	if err := os.Chtimes(filepath.Join(src, "a.txt"), st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	got, err = EntryDigests(ctx, m)
	if err != nil || got["repo"] == "blake3:remembered" || got["repo"] == real["repo"] {
		t.Fatalf("a changed file went unnoticed: %v, %v", got, err)
	}
	// Changed just now: not remembered, so the old entry stays as it was.
	if c.entries[key].Digest != "blake3:remembered" {
		t.Fatalf("a tree changed within the racy window was remembered: %+v", c.entries[key])
	}
}

// TestPlanDigests: for a sandbox about to be created, a local_dir the
// cache does not know is left for the copy to hash (deferred) while
// everything else is digested; a remembered tree's digest is used; a
// tree the copy would refuse is refused now, with EntryDigests's error.
func TestPlanDigests(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "alpha", "sub/b.txt": "bravo"})
	m := Manifest{Entries: []Entry{
		{Kind: EntryLocalDir, Path: "repo", Source: src},
		{Kind: EntryFile, Path: "notes.txt", Content: []byte("hi")},
	}}
	want, err := EntryDigests(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	m.DigestCache = OpenDigestCache(filepath.Join(t.TempDir(), "digests.json"))
	got, deferred, err := PlanDigests(ctx, m, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(deferred) != 1 || deferred[0] != "repo" || got["repo"] != "" || got["notes.txt"] != want["notes.txt"] {
		t.Fatalf("PlanDigests = %v, deferred %v; want repo deferred and notes.txt %s", got, deferred, want["notes.txt"])
	}
	if len(m.DigestCache.entries) != 0 {
		t.Fatal("PlanDigests hashed the deferred tree into the cache")
	}

	// Once remembered (an apply's copy hashed it), the digest is known.
	m.DigestCache.Now = settle(t)
	if _, err := EntryDigests(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, deferred, err = PlanDigests(ctx, m, false)
	if err != nil || len(deferred) != 0 || got["repo"] != want["repo"] {
		t.Fatalf("remembered tree: %v, deferred %v, %v; want %s", got, deferred, err, want["repo"])
	}

	// What the copy refuses is refused by the plan, as before.
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	_, wantErr := EntryDigests(ctx, Manifest{Entries: m.Entries})
	if wantErr == nil {
		t.Fatal("EntryDigests accepted a symlink in a local_dir")
	}
	if _, _, err := PlanDigests(ctx, m, false); err == nil || err.Error() != wantErr.Error() {
		t.Fatalf("PlanDigests with a symlink in the tree: %v; want %v", err, wantErr)
	}
	missing := Manifest{Entries: []Entry{{Kind: EntryLocalDir, Path: "gone", Source: filepath.Join(src, "nope")}}}
	if _, _, err := PlanDigests(ctx, missing, false); err == nil {
		t.Fatal("PlanDigests accepted a missing source")
	}
}

// TestPlannedSignature: the signature a plan took of a tree it left to the
// copy serves, once, as the copy's signature before it reads the tree
// (one walk fewer), and is the tree's signature.
func TestPlannedSignature(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "alpha", "sub/b.txt": "bravo"})
	e := Entry{Kind: EntryLocalDir, Path: "./repo", Source: src}
	m := Manifest{Entries: []Entry{e}, DigestCache: OpenDigestCache(filepath.Join(t.TempDir(), "digests.json"))}
	m.DigestCache.Now = settle(t)
	if _, deferred, err := PlanDigests(ctx, m, false); err != nil || len(deferred) != 1 {
		t.Fatalf("PlanDigests: deferred %v, %v", deferred, err)
	}
	e.Path = "repo"
	want := m.DigestCache.Signature(e)
	if got := m.DigestCache.planned[cacheKey(e)]; got == "" || got != want {
		t.Fatalf("planned signature %q, want the tree's %q", got, want)
	}
	if got := m.DigestCache.signatureBefore(e); got != want {
		t.Fatalf("signatureBefore = %q, want %q", got, want)
	}
	if _, ok := m.DigestCache.planned[cacheKey(e)]; ok {
		t.Fatal("the planned signature was not used up")
	}
}

// TestPlanDigestsForApply: a plan applied at once leaves a tree the cache
// holds nothing for to the copy, unwalked: a symlink in it is refused by
// the copy, with the plan's reason, while a missing source or a bad
// exclude pattern is still refused by the plan; a tree the cache holds is
// walked and its digest taken, as before.
func TestPlanDigestsForApply(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "alpha", "sub/b.txt": "bravo"})
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	e := Entry{Kind: EntryLocalDir, Path: "repo", Source: src}
	m := Manifest{Entries: []Entry{e}, DigestCache: OpenDigestCache(filepath.Join(t.TempDir(), "digests.json"))}
	if _, _, err := PlanDigests(ctx, m, false); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("plan: %v; want the symlink refused", err)
	}
	got, deferred, err := PlanDigests(ctx, m, true)
	if err != nil || len(deferred) != 1 || got["repo"] != "" {
		t.Fatalf("plan for apply: %v, deferred %v, %v; want repo left to the copy", got, deferred, err)
	}
	_, err = Materialize(ctx, newHostDir(t), m, nil, 1)
	if err == nil || !strings.Contains(err.Error(), "sub/link is a symlink") || !strings.Contains(err.Error(), "only regular files and directories are copied") {
		t.Fatalf("the copy of a tree with a symlink: %v; want it refused, saying why", err)
	}

	for name, bad := range map[string]Manifest{
		"missing source": {Entries: []Entry{{Kind: EntryLocalDir, Path: "gone", Source: filepath.Join(src, "nope")}}},
		"bad exclude":    {Entries: []Entry{{Kind: EntryLocalDir, Path: "repo", Source: src, Exclude: []string{"[a-"}}}},
	} {
		bad.DigestCache = m.DigestCache
		if _, _, err := PlanDigests(ctx, bad, true); err == nil {
			t.Errorf("%s: the plan for apply accepted it", name)
		}
	}

	// A tree the cache holds a digest for is walked: its digest is known
	// when the tree is unchanged.
	os.Remove(filepath.Join(src, "sub", "link"))
	m.DigestCache.Now = settle(t)
	want, err := EntryDigests(ctx, m) // remembers it
	if err != nil {
		t.Fatal(err)
	}
	got, deferred, err = PlanDigests(ctx, m, true)
	if err != nil || len(deferred) != 0 || got["repo"] != want["repo"] {
		t.Fatalf("remembered tree, plan for apply: %v, deferred %v, %v; want %s", got, deferred, err, want["repo"])
	}
}

// TestWalkSignatureOrder: the signature walk, which walks the top's
// subtrees concurrently, gives the signature of a filepath.WalkDir of the
// source in order (what caches written by earlier versions hold), with
// excludes applied, for trees with many subtrees, nested and empty
// directories and files at the top between directories.
func TestWalkSignatureOrder(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{"a.txt": "a", "m.txt": "m", "z.txt": "z", "skip.tmp": "x"}
	for i := range 12 {
		files[fmt.Sprintf("d%02d/f.txt", i)] = "f"
		files[fmt.Sprintf("d%02d/sub/g.txt", i)] = "g"
		files[fmt.Sprintf("d%02d/sub/h.tmp", i)] = "h"
	}
	writeTree(t, src, files)
	for _, d := range []string{"empty", "d03/sub/deeper/emptier", "node_modules/x"} {
		os.MkdirAll(filepath.Join(src, d), 0o755)
	}
	for _, exclude := range [][]string{nil, {"*.tmp", "node_modules"}} {
		m, err := sandbox.CompileExclude(exclude)
		if err != nil {
			t.Fatal(err)
		}
		want := newSigner(time.Now())
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			rel = filepath.ToSlash(rel)
			if rel != "." && m.Match(rel, d.IsDir()) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				return err
			}
			want.record(rel, hostfs.EntryStat(&st))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, readable := range []bool{false, true} {
			got, _ := walkSignature(Entry{Kind: EntryLocalDir, Path: "repo", Source: src, Exclude: exclude}, readable, time.Now())
			if got == "" || got != want.sum() {
				t.Errorf("excludes %q, readable %v: signature %q, want a walk in order's %q", exclude, readable, got, want.sum())
			}
		}
	}
}
