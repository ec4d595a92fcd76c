//go:build unix

package manifest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/digest"
)

// TestSHA256DigestsUnchanged: a manifest whose state keeps SHA-256
// digests (created before BLAKE3) gets, for the same sources, exactly
// the digests earlier versions recorded (the values below were computed
// by the version before BLAKE3), so an upgrade plans no change; the
// same manifest with BLAKE3 names its algorithm in its digests.
func TestSHA256DigestsUnchanged(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "alpha\n", "d/run.sh": "#!/bin/sh\necho hi\n"})
	for p, mode := range map[string]os.FileMode{".": 0o700, "d": 0o755, "a.txt": 0o644, "d/run.sh": 0o755} {
		if err := os.Chmod(filepath.Join(src, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(t.TempDir(), "one.txt")
	if err := os.WriteFile(f, []byte("one file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := Manifest{Root: "/workspace", Digests: digest.SHA256, Entries: []Entry{
		{Kind: EntryLocalDir, Path: "repo", Source: src},
		{Kind: EntryLocalFile, Path: "cfg/one.txt", Source: f},
		{Kind: EntryFile, Path: "note.md", Content: []byte("# note\n")},
	}}
	got, err := EntryDigests(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"repo":        "sha256:2c065d75f6b87bdadf4f834a1e01d1c82082848268ee6610ab4985fa7fe86a92",
		"cfg/one.txt": "sha256:a58569ee7ccbc64903f74da4828601e6acc37649ca15e4aac97cf36f8198ff50",
		"note.md":     "sha256:de6359d42ca8f7e94bd36ee9d9f844e4df06e282cdec26da5183518c9e6dba6d",
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %s, earlier versions recorded %s", p, got[p], w)
		}
	}
	if d := Digest(m, got); d != "sha256:a6f3e733ad21cd5f50bc0db539c2478ad3c0b50301a86c924316591df3669577" {
		t.Errorf("manifest digest %s, earlier versions recorded sha256:a6f3e733…", d)
	}

	m.Digests = digest.BLAKE3
	b3, err := EntryDigests(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"repo", "cfg/one.txt"} {
		if !strings.HasPrefix(b3[p], "blake3:") || len(b3[p]) != len("blake3:")+64 {
			t.Errorf("%s with BLAKE3: %q", p, b3[p])
		}
	}
	// A declaration read from the configuration, not the host, is
	// digested as before whatever the algorithm.
	if b3["note.md"] != want["note.md"] {
		t.Errorf("note.md with BLAKE3: %s, want %s", b3["note.md"], want["note.md"])
	}
}
