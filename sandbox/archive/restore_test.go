//go:build unix

package archive

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/testfiles"
)

// TestRestoreSnapshotChecksTheFile: RestoreSnapshot restores a snapshot
// whose digest matches, links leaving the workspace included, and reports
// a missing file, a directory in its place and a file whose content does
// not match its recorded digest (even when it still unpacks).
func TestRestoreSnapshotChecksTheFile(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	testfiles.WriteTree(t, h.Path(), map[string]string{"data.txt": strings.Repeat("abc\n", 1000)})
	if err := os.Symlink("/etc/passwd", filepath.Join(h.Path(), "abslink")); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "snap.tar")
	info, err := Snapshot(ctx, h, "", nil, dst)
	if err != nil {
		t.Fatal(err)
	}

	h2 := newHostDir(t)
	if err := RestoreSnapshot(ctx, h2, dst, info.Digest); err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, h2, "data.txt"); got != strings.Repeat("abc\n", 1000) {
		t.Errorf("data.txt = %d bytes", len(got))
	}
	if tgt, err := os.Readlink(filepath.Join(h2.Path(), "abslink")); err != nil || tgt != "/etc/passwd" {
		t.Errorf("abslink = %q, %v", tgt, err)
	}

	good, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	flipped := []byte(strings.Replace(string(good), "abc\nabc\n", "abc\nabd\n", 1))
	if err := os.WriteFile(dst, flipped, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RestoreSnapshot(ctx, newHostDir(t), dst, info.Digest); !errors.Is(err, ErrSnapshotCorrupt) || !strings.Contains(err.Error(), info.Digest) {
		t.Errorf("restoring a file that does not match its digest: %v, want ErrSnapshotCorrupt naming the digest", err)
	}
	// Without a recorded digest there is nothing to check against.
	if err := RestoreSnapshot(ctx, newHostDir(t), dst, ""); err != nil {
		t.Errorf("restoring without a digest: %v", err)
	}
	if err := RestoreSnapshot(ctx, newHostDir(t), filepath.Join(t.TempDir(), "gone.tar"), info.Digest); !errors.Is(err, ErrSnapshotMissing) || !strings.Contains(err.Error(), "gone.tar") {
		t.Errorf("restoring a missing file: %v, want ErrSnapshotMissing naming it", err)
	}
	if err := RestoreSnapshot(ctx, newHostDir(t), t.TempDir(), info.Digest); !errors.Is(err, ErrSnapshotCorrupt) {
		t.Errorf("restoring a directory: %v, want ErrSnapshotCorrupt", err)
	}
	// A digest this version cannot check is refused before anything is
	// extracted, not skipped.
	h3 := newHostDir(t)
	if err := RestoreSnapshot(ctx, h3, dst, "blake9:"+strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), `unknown algorithm "blake9"`) {
		t.Errorf("restoring with a digest of an unknown algorithm: %v", err)
	}
	if ents, _ := os.ReadDir(h3.Path()); len(ents) != 0 {
		t.Errorf("a refused restore extracted %d entries", len(ents))
	}
}

// TestSnapshotDigests: a snapshot's digest is BLAKE3 ("blake3:<hex>"),
// or for a state that keeps SHA-256 digests the bare hex SHA-256 of the
// file, as earlier versions recorded it; a restore checks either.
func TestSnapshotDigests(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	testfiles.WriteTree(t, h.Path(), map[string]string{"data.txt": strings.Repeat("abc\n", 1000)})
	dir := t.TempDir()
	b3, err := SnapshotWith(ctx, h, "", filepath.Join(dir, "b3.tar"), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sha, err := SnapshotWith(ctx, h, "", filepath.Join(dir, "sha.tar"), SnapshotOptions{Digest: digest.SHA256})
	if err != nil {
		t.Fatal(err)
	}
	if want := fileDigest(t, digest.BLAKE3, b3.Path); b3.Digest != want {
		t.Errorf("BLAKE3 snapshot digest %q, the file's is %q", b3.Digest, want)
	}
	if want := fileDigest(t, digest.SHA256, sha.Path); "sha256:"+sha.Digest != want {
		t.Errorf("SHA-256 snapshot digest %q, the file's is %q", sha.Digest, want)
	}
	for _, info := range []SnapshotInfo{b3, sha} {
		h2 := newHostDir(t)
		if err := RestoreSnapshot(ctx, h2, info.Path, info.Digest); err != nil {
			t.Fatalf("restore with %s: %v", info.Digest, err)
		}
		if got := readWS(t, h2, "data.txt"); got != strings.Repeat("abc\n", 1000) {
			t.Errorf("restored data.txt = %d bytes", len(got))
		}
	}
	// Each file checked against the other's digest: refused as corrupt.
	if err := RestoreSnapshot(ctx, newHostDir(t), sha.Path, "blake3:"+sha.Digest); !errors.Is(err, ErrSnapshotCorrupt) {
		t.Errorf("SHA-256 file with a BLAKE3 digest: %v, want ErrSnapshotCorrupt", err)
	}
	if err := RestoreSnapshot(ctx, newHostDir(t), b3.Path, strings.TrimPrefix(b3.Digest, "blake3:")); !errors.Is(err, ErrSnapshotCorrupt) {
		t.Errorf("BLAKE3 file with its hex as a SHA-256: %v, want ErrSnapshotCorrupt", err)
	}
}

// fileDigest is the digest of file p with alg, as alg.Format writes it.
func fileDigest(t *testing.T, alg digest.Algorithm, p string) string {
	t.Helper()
	h := alg.New()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return alg.Format(h.Sum(nil))
}
