//go:build linux

package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/testfiles"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// TestSparseSnapshotRestore: an 8 GiB file with two small pieces of data
// snapshots into a few KB and restores as a sparse file of the same size
// and content.
func TestSparseSnapshotRestore(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	const size = 8 << 30
	f, err := os.Create(filepath.Join(h.Path(), "big.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	pieces := map[int64]string{1 << 30: "in the middle", size - 4: "end!"}
	for off, s := range pieces {
		if _, err := f.WriteAt([]byte(s), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	testfiles.WriteTree(t, h.Path(), map[string]string{"small.txt": "hello\n"})
	if err := os.WriteFile(filepath.Join(h.Path(), "holes-only"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(h.Path(), "holes-only"), 1<<30); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(t.TempDir(), "snapshots", "sandbox.big.tar")
	info, err := Snapshot(ctx, h, "", nil, dst)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size > 1<<20 {
		t.Fatalf("snapshot of sparse files is %d bytes, want well under 1 MiB", info.Size)
	}
	// Any tar reader that knows the PAX sparse format sees the files.
	tf, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	tr := tar.NewReader(tf)
	sizes := map[string]int64{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes[hdr.Name] = hdr.Size
	}
	if sizes["big.img"] != size || sizes["holes-only"] != 1<<30 || sizes["small.txt"] != 6 {
		t.Fatalf("archive members: %v", sizes)
	}

	h2 := newHostDir(t)
	if err := Restore(ctx, h2, dst); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"big.img": size, "holes-only": 1 << 30} {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(h2.Path(), name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Size != want {
			t.Errorf("restored %s is %d bytes, want %d", name, st.Size, want)
		}
		if st.Blocks*512 > 1<<20 {
			t.Errorf("restored %s takes %d bytes on disk: its holes were written as zeros", name, st.Blocks*512)
		}
	}
	rf, err := os.Open(filepath.Join(h2.Path(), "big.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	for off, s := range pieces {
		b := make([]byte, len(s)+2)
		n, _ := rf.ReadAt(b, off-1)
		if want := "\x00" + s; string(b[:n])[:len(want)] != want {
			t.Errorf("restored data at %d = %q, want %q", off, b[:n], want)
		}
	}
	if got := readWS(t, h2, "small.txt"); got != "hello\n" {
		t.Errorf("small.txt = %q", got)
	}
}

// TestSnapshotLimit: a snapshot over its limit fails naming the limit and
// the largest files, and the previous snapshot stays as it was.
func TestSnapshotLimit(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	testfiles.WriteTree(t, h.Path(), map[string]string{"notes.txt": "n"})
	dst := filepath.Join(t.TempDir(), "snapshots", "sandbox.box.tar")
	first, err := SnapshotWith(ctx, h, "", dst, SnapshotOptions{MaxBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	testfiles.WriteTree(t, h.Path(), map[string]string{
		"data/a.bin": strings.Repeat("a", 3<<20),
		"data/b.bin": strings.Repeat("b", 2<<20),
		"c.txt":      "c",
	})
	for name, sb := range map[string]sandbox.Sandbox{"host directory": h, "provider archive": opaque{h}} {
		_, err = SnapshotWith(ctx, sb, "", dst, SnapshotOptions{MaxBytes: 4 << 20})
		if !errors.Is(err, ErrSnapshotTooLarge) {
			t.Fatalf("%s: snapshot over the limit: %v, want ErrSnapshotTooLarge", name, err)
		}
		for _, want := range []string{"4 MiB", "data/a.bin (3 MiB)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not mention %q: %v", name, want, err)
			}
		}
		if got := fileDigest(t, digest.BLAKE3, dst); got != first.Digest {
			t.Errorf("%s: the previous snapshot was changed", name)
		}
		if ents, _ := os.ReadDir(filepath.Dir(dst)); len(ents) != 1 {
			t.Errorf("%s: files left beside the snapshot: %v", name, ents)
		}
	}
}

// tarSandbox's CopyOut returns a fixed archive, as a container engine's
// might.
type tarSandbox struct {
	sandbox.Sandbox
	archive []byte
}

func (s tarSandbox) CopyOut(ctx context.Context, dir string) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(s.archive)), nil
}

// TestSnapshotOfProviderArchive: FIFOs and devices in a provider's
// archive are left out (no extractor accepts them), and too long paths
// fail the snapshot.
func TestSnapshotOfProviderArchive(t *testing.T) {
	ctx := context.Background()
	h := newHostDir(t)
	arch := testfiles.Tar(t, testfiles.Reg("a.txt", "A"), &tar.Header{Name: "fifo", Typeflag: tar.TypeFifo, Mode: 0o644},
		&tar.Header{Name: "zero", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 5, Mode: 0o666})
	dst := filepath.Join(t.TempDir(), "s.tar")
	if _, err := Snapshot(ctx, tarSandbox{h, arch}, "", nil, dst); err != nil {
		t.Fatal(err)
	}
	h2 := newHostDir(t)
	if err := Restore(ctx, h2, dst); err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, h2, "a.txt"); got != "A" {
		t.Errorf("a.txt = %q", got)
	}
	deep := strings.Repeat("d/", 2100) + "f"
	if _, err := Snapshot(ctx, tarSandbox{h, testfiles.Tar(t, testfiles.Reg(deep, "x"))}, "", nil, dst); !errors.Is(err, hostfs.ErrPathTooLong) {
		t.Fatalf("snapshot of a %d-byte path: %v, want hostfs.ErrPathTooLong", len(deep), err)
	}
}

// mkdirChain creates depth nested directories named "d" under root with
// a file "f<level>" in every level divisible by fileEvery (0: none), one
// level at a time through file descriptors (the path soon exceeds
// PATH_MAX).
func mkdirChain(t testing.TB, root string, depth, fileEvery int) {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= depth; i++ {
		if fileEvery > 0 && i%fileEvery == 0 {
			ffd, err := unix.Openat(fd, fmt.Sprintf("f%d", i), unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			unix.Write(ffd, []byte(fmt.Sprint(i)))
			unix.Close(ffd)
		}
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
}

// TestDeepTree: a tree 30,000 directories deep fails a snapshot with a
// clear error (not EMFILE) and is removed whole by Delete; one 1,500 deep
// goes through snapshot and restore.
func TestDeepTree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a tree 30,000 directories deep")
	}
	ctx := context.Background()
	h := newHostDir(t)
	mkdirChain(t, h.Path(), 30000, 0)
	dst := filepath.Join(t.TempDir(), "deep.tar")
	_, err := Snapshot(ctx, h, "", nil, dst)
	if !errors.Is(err, hostfs.ErrPathTooLong) || !strings.Contains(err.Error(), "4096 bytes") {
		t.Fatalf("snapshot of a 30,000-level tree: %v, want hostfs.ErrPathTooLong", err)
	}
	if errors.Is(err, syscall.EMFILE) {
		t.Fatalf("snapshot ran out of file descriptors: %v", err)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Error("a failed snapshot left a file")
	}
	// A directory a command made unreadable on the way down.
	if err := os.Chmod(filepath.Join(h.Path(), "d", "d"), 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Delete(ctx); err != nil {
		t.Fatalf("delete of a 30,000-level tree: %v", err)
	}
	if _, err := os.Lstat(h.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("workspace still there after delete: %v", err)
	}

	h = newHostDir(t)
	mkdirChain(t, h.Path(), 1500, 100)
	if _, err := Snapshot(ctx, h, "", nil, dst); err != nil {
		t.Fatalf("snapshot of a 1,500-level tree: %v", err)
	}
	h2 := newHostDir(t)
	if err := Restore(ctx, h2, dst); err != nil {
		t.Fatalf("restore of a 1,500-level tree: %v", err)
	}
	// Every file came back, including those walked after their level's
	// deep subdirectory.
	for i := 100; i <= 1500; i += 100 {
		p := strings.Repeat("d/", i-1) + fmt.Sprintf("f%d", i)
		b, err := h2.ReadFile(ctx, p, 0)
		if err != nil || string(b) != fmt.Sprint(i) {
			t.Errorf("level %d: %q, %v", i, b, err)
		}
	}
	if err := hostfs.RemoveAll(h2.Path()); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveSnapshotTemps(t *testing.T) {
	dir := t.TempDir()
	testfiles.WriteTree(t, dir, map[string]string{
		"sandbox.box.tar": "keep", ".sandbox.box.tar.tmp-12ab": "stale", ".sandbox.other.tar.tmp-x": "stale", "notes": "keep",
	})
	removed, err := RemoveSnapshotTemps(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Errorf("removed %v", removed)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "notes,sandbox.box.tar" {
		t.Errorf("left %v", names)
	}
	if removed, err := RemoveSnapshotTemps(filepath.Join(dir, "missing")); err != nil || removed != nil {
		t.Errorf("missing directory: %v %v", removed, err)
	}
}

// opaque hides that a HostDir is a host directory, so snapshots go
// through CopyOut as for docker and daytona.
type opaque struct{ sandbox.Sandbox }

// TestSnapshotOfLegacyArchive: regular files typed NUL in a provider's
// archive (old tar writers) are snapshotted, counted and scanned for
// sensitive values like any regular file.
func TestSnapshotOfLegacyArchive(t *testing.T) {
	ctx := t.Context()
	const secret = "hunter22-token"
	arch := testfiles.LegacyTar(t, "old.txt", "legacy\n", "d/", "", "d/key", "k="+secret+"\n")
	dst := filepath.Join(t.TempDir(), "s.tar")
	info, err := Snapshot(ctx, tarSandbox{newHostDir(t), arch}, "", nil, dst)
	if err != nil {
		t.Fatal(err)
	}
	if info.Members != 3 {
		t.Errorf("members = %d, want 3", info.Members)
	}
	h := newHostDir(t)
	if err := Restore(ctx, h, dst); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"old.txt": "legacy\n", "d/key": "k=" + secret + "\n"} {
		if got := readWS(t, h, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	got, err := SensitiveMembers(ctx, dst, sandbox.NewScrubber([]string{secret}))
	if err != nil || len(got) != 1 || got[0] != "d/key" {
		t.Errorf("SensitiveMembers = %q, %v; want d/key", got, err)
	}
	// Budget: the legacy members' contents count towards the limit.
	_, err = SnapshotWith(ctx, tarSandbox{newHostDir(t), testfiles.LegacyTar(t, "big", strings.Repeat("x", 4<<10))}, "", dst, SnapshotOptions{MaxBytes: 2 << 10})
	if !errors.Is(err, ErrSnapshotTooLarge) {
		t.Errorf("snapshot over the limit: %v, want ErrSnapshotTooLarge", err)
	}
}
