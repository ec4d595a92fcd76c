package archive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// copySourceTree is a tree whose members stress a restore that copies
// content in the kernel: empty files, sizes around a tar block, content
// larger than the copy's buffer, a name long enough for a PAX header,
// nested directories and a symlink.
func copySourceTree(t *testing.T, root string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(21, 22))
	body := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	testfiles.WriteTree(t, root, map[string]string{
		"empty":   "",
		"one":     "x",
		"b511":    body(511),
		"b512":    body(512),
		"b513":    body(513),
		"d/e/big": body(700 << 10),
		"d/mid":   body(40 << 10),
		"d/" + strings.Repeat("long-name-", 12) + "end": body(1000),
	})
	// Whole seconds, as the archive keeps them.
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, time.Unix(1700000000, 0), time.Unix(1700000000, 0))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d/mid", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
}

// checkRestore snapshots h into directory dir, restores the snapshot
// into a new workspace as RestoreSnapshot does, through a copySource, and
// fails the test unless the tree restored is h's and the digest of what
// the restore read (the headers, and the content read back from the
// files restored) is the snapshot's.
func checkRestore(t *testing.T, h *hostfs.HostDir, dir string) {
	t.Helper()
	ctx := context.Background()
	info, err := Snapshot(ctx, h, "", nil, filepath.Join(dir, "snap.tar"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := hashpipe.New(digest.BLAKE3.New())
	defer p.Close()
	r, err := restoreSource(f, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(*copySource); !ok {
		t.Fatalf("the restore of a plain snapshot file reads a %T, not a copySource", r)
	}
	h2 := newHostDir(t)
	if err := h2.CopyIn(ctx, "", r); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	sum := p.Sum()
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	if got := digest.BLAKE3.Format(sum); got != info.Digest {
		t.Errorf("restore digest %s, the snapshot's is %s", got, info.Digest)
	}
	if want, have := testfiles.DescribeTree(t, h.Path()), testfiles.DescribeTree(t, h2.Path()); !maps.Equal(want, have) {
		t.Errorf("restored tree differs:\n have %v\n want %v", have, want)
	}
	if err := RestoreSnapshot(ctx, newHostDir(t), info.Path, info.Digest); err != nil {
		t.Errorf("RestoreSnapshot: %v", err)
	}
}

// TestRestoreCopiesContent: restoring a snapshot from a copySource (each
// member's content copied into its file by the extractor's worker, in
// the kernel on one file system) gives the tree snapshot, and the
// digest, of the headers read and the content read back from the
// restored files once copied, is the snapshot file's.
func TestRestoreCopiesContent(t *testing.T) {
	h := newHostDir(t)
	copySourceTree(t, h.Path())
	checkRestore(t, h, t.TempDir())
}

// TestRestoreAcrossFileSystems: a snapshot on another file system than
// the workspace (/dev/shm against the test's temporary directory), where
// copy_file_range refuses to copy, is restored through the worker's
// buffer, with the same tree and digest.
func TestRestoreAcrossFileSystems(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "agentctl-restore-")
	if err != nil {
		testenv.Missing(t, "no /dev/shm to put a snapshot on another file system: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	h := newHostDir(t)
	var a, b unix.Stat_t
	if unix.Stat(shm, &a) != nil || unix.Stat(h.Path(), &b) != nil || a.Dev == b.Dev {
		testenv.Missing(t, "/dev/shm and %s are on one file system (a test needs two)", os.TempDir())
	}
	copySourceTree(t, h.Path())
	checkRestore(t, h, shm)
}

// TestRestoreRepeatedMember: an archive naming one file twice restores
// the second content, and its digest, read back from the files restored,
// is still the archive's: the first member's content is read from the
// file it went to, which the second replaced, not overwrote.
func TestRestoreRepeatedMember(t *testing.T) {
	data := testfiles.Tar(t,
		testfiles.Reg("f", strings.Repeat("first ", 2000)),
		&tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755},
		testfiles.Reg("f", strings.Repeat("second", 1500)),
	)
	snap := filepath.Join(t.TempDir(), "twice.tar")
	if err := os.WriteFile(snap, data, 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHostDir(t)
	if err := RestoreSnapshot(context.Background(), h, snap, fileDigest(t, digest.BLAKE3, snap)); err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, h, "f"); got != strings.Repeat("second", 1500) {
		t.Errorf("f holds %d bytes, not the second member's", len(got))
	}
}

// TestCopiedFileWaits: the digest's read of a restored file waits until
// the extractor's worker reports the copy done, then reads the content
// copied, or fails with the copy's error.
func TestCopiedFileWaits(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	open := func() *copiedFile {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return &copiedFile{f: f, copied: make(chan struct{})}
	}
	c := open()
	read := make(chan string, 1)
	go func() {
		b := make([]byte, 5)
		n, err := c.ReadAt(b, 0)
		read <- fmt.Sprint(string(b[:n]), " ", err)
	}()
	select {
	case got := <-read:
		t.Fatalf("ReadAt returned %q before the copy was done", got)
	case <-time.After(50 * time.Millisecond):
	}
	if err := os.WriteFile(p, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.done(nil)
	c.done(errors.New("a second outcome is ignored"))
	if got := <-read; got != "hello <nil>" {
		t.Errorf("ReadAt after the copy = %q, want the content copied", got)
	}
	c2 := open()
	boom := errors.New("copy failed")
	c2.done(boom)
	if _, err := c2.ReadAt(make([]byte, 5), 0); !errors.Is(err, boom) {
		t.Errorf("ReadAt after a failed copy = %v, want its error", err)
	}
}
