//go:build unix

package manifest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	time.Sleep(racyWindow + 100*time.Millisecond)
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
	hit.Digest = "sha256:remembered"
	c.entries[key] = hit
	m.DigestCache = c
	if got, _ := EntryDigests(ctx, m); got["repo"] != "sha256:remembered" {
		t.Fatalf("an unchanged tree was read again: %v", got)
	}
	// An excluded file changes nothing.
	writeTree(t, src, map[string]string{"skip/c.txt": "CHARLIE"})
	if got, _ := EntryDigests(ctx, m); got["repo"] != "sha256:remembered" {
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
	if err != nil || got["repo"] == "sha256:remembered" || got["repo"] == real["repo"] {
		t.Fatalf("a changed file went unnoticed: %v, %v", got, err)
	}
	// Changed just now: not remembered, so the old entry stays as it was.
	if c.entries[key].Digest != "sha256:remembered" {
		t.Fatalf("a tree changed within the racy window was remembered: %+v", c.entries[key])
	}
}
