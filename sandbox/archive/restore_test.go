//go:build unix

package archive

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	if err := RestoreSnapshot(ctx, h2, dst, info.SHA256); err != nil {
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
	if err := RestoreSnapshot(ctx, newHostDir(t), dst, info.SHA256); !errors.Is(err, ErrSnapshotCorrupt) || !strings.Contains(err.Error(), info.SHA256) {
		t.Errorf("restoring a file that does not match its digest: %v, want ErrSnapshotCorrupt naming the digest", err)
	}
	// Without a recorded digest there is nothing to check against.
	if err := RestoreSnapshot(ctx, newHostDir(t), dst, ""); err != nil {
		t.Errorf("restoring without a digest: %v", err)
	}
	if err := RestoreSnapshot(ctx, newHostDir(t), filepath.Join(t.TempDir(), "gone.tar"), info.SHA256); !errors.Is(err, ErrSnapshotMissing) || !strings.Contains(err.Error(), "gone.tar") {
		t.Errorf("restoring a missing file: %v, want ErrSnapshotMissing naming it", err)
	}
	if err := RestoreSnapshot(ctx, newHostDir(t), t.TempDir(), info.SHA256); !errors.Is(err, ErrSnapshotCorrupt) {
		t.Errorf("restoring a directory: %v, want ErrSnapshotCorrupt", err)
	}
}
