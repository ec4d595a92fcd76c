//go:build unix

package archive

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/testfiles"
)

func TestSnapshotRestore(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	testfiles.WriteTree(t, h.Path(), map[string]string{
		"src/main.py": "print(1)\n", "run.sh": "#!/bin/sh\n", ".cache/pip/x": "junk", "out/a.tmp": "tmp", "out/keep.txt": "k",
	})
	os.Symlink("src/main.py", filepath.Join(h.Path(), "main"))
	state := t.TempDir()
	dst := filepath.Join(state, "snapshots", "sandbox.analysis.tar")
	info, err := Snapshot(ctx, h, "", []string{".cache/", "*.tmp"}, dst)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dst)
	if err != nil || st.Size() != info.Size || !strings.HasPrefix(info.Digest, "blake3:") || len(info.Digest) != 71 || info.Members == 0 {
		t.Fatalf("snapshot info %+v, stat %v", info, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dst)); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	// The digest is the file's, its files' content appended in the
	// kernel and read back for the digest (Linux) or written through it.
	file, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	fh := digest.BLAKE3.New()
	fh.Write(file)
	if want := digest.BLAKE3.Format(fh.Sum(nil)); info.Digest != want {
		t.Fatalf("snapshot digest %s, the file's %s", info.Digest, want)
	}
	// The sandbox is lost; restore into a fresh one.
	h2 := newHostDir(t)
	if err := Restore(ctx, h2, dst); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"src/main.py": "print(1)\n", "out/keep.txt": "k", "main": "print(1)\n"} {
		if got := readWS(t, h2, p); got != want {
			t.Errorf("%s = %q", p, got)
		}
	}
	for _, p := range []string{".cache", "out/a.tmp"} {
		if _, err := os.Lstat(filepath.Join(h2.Path(), p)); err == nil {
			t.Errorf("%s was not excluded", p)
		}
	}
	if st, _ := os.Stat(filepath.Join(h2.Path(), "run.sh")); st == nil || st.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode %v", st)
	}
	// A second snapshot replaces the first atomically.
	testfiles.WriteTree(t, h.Path(), map[string]string{"new.txt": "n"})
	info2, err := Snapshot(ctx, h, "", nil, dst)
	if err != nil || info2.Digest == info.Digest {
		t.Errorf("second snapshot: %+v %v", info2, err)
	}
	if err := Restore(ctx, h2, filepath.Join(state, "missing.tar")); err == nil {
		t.Error("restoring a missing snapshot succeeded")
	}
}
