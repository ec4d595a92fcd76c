//go:build unix

package archive

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/sandbox/hostfs"
	"github.com/agentctl/agentctl/sandbox/manifest"
)

// benchTree writes 5,000 files totalling 200 MB (sizes varying around
// 40 KB) in 100 directories of 50, with a deterministic mix of content.
func benchTree(b *testing.B, root string) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	const files, total = 5000, 200 << 20
	buf := make([]byte, 2*total/files)
	for i := range buf {
		buf[i] = byte(rng.IntN(256))
	}
	for i := range files {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", i/50), fmt.Sprintf("s%d", i%5))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		n := total/files/2 + rng.IntN(total/files)
		off := rng.IntN(len(buf) - n)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.dat", i)), buf[off:off+n], 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func runCmd(b *testing.B, name string, args ...string) {
	b.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// BenchmarkTree compares, in one run, materializing a local_dir against
// cp -a of the same tree, and snapshot+restore against tar -c + tar -x.
// Each iteration writes into a fresh directory; removal is not timed.
func BenchmarkTree(b *testing.B) {
	for _, tool := range []string{"cp", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not installed: the baselines need it", tool)
		}
	}
	ctx := context.Background()
	base := b.TempDir()
	src := filepath.Join(base, "src")
	benchTree(b, src)
	work := filepath.Join(base, "work")
	fresh := func(b *testing.B) string {
		b.StopTimer()
		os.RemoveAll(work)
		if err := os.MkdirAll(work, 0o755); err != nil {
			b.Fatal(err)
		}
		runCmd(b, "sync")
		b.StartTimer()
		return work
	}
	b.Run("materialize_local_dir", func(b *testing.B) {
		b.SetBytes(200 << 20)
		for b.Loop() {
			dst := fresh(b)
			h, err := hostfs.NewHostDir(dst)
			if err != nil {
				b.Fatal(err)
			}
			m := manifest.Manifest{Entries: []manifest.Entry{{Kind: manifest.EntryLocalDir, Path: "repo", Source: src}}}
			if _, err := manifest.Materialize(ctx, h, m, nil, 4); err != nil {
				b.Fatal(err)
			}
			h.Close()
		}
	})
	b.Run("cp_a", func(b *testing.B) {
		b.SetBytes(200 << 20)
		for b.Loop() {
			dst := fresh(b)
			runCmd(b, "cp", "-a", src, filepath.Join(dst, "repo"))
		}
	})
	snapDir := filepath.Join(base, "snap")
	os.MkdirAll(snapDir, 0o755)
	srcSB, err := hostfs.NewHostDir(src)
	if err != nil {
		b.Fatal(err)
	}
	defer srcSB.Close()
	b.Run("snapshot_restore", func(b *testing.B) {
		b.SetBytes(200 << 20)
		for b.Loop() {
			dst := fresh(b)
			file := filepath.Join(snapDir, "s.tar")
			if _, err := Snapshot(ctx, srcSB, "", nil, file); err != nil {
				b.Fatal(err)
			}
			h, err := hostfs.NewHostDir(dst)
			if err != nil {
				b.Fatal(err)
			}
			if err := Restore(ctx, h, file); err != nil {
				b.Fatal(err)
			}
			h.Close()
		}
	})
	b.Run("tar_c_tar_x", func(b *testing.B) {
		b.SetBytes(200 << 20)
		for b.Loop() {
			dst := fresh(b)
			file := filepath.Join(snapDir, "t.tar")
			runCmd(b, "tar", "-cf", file, "-C", src, ".")
			runCmd(b, "tar", "-xf", file, "-C", dst)
		}
	})
	b.Run("tar_c_sync_tar_x", func(b *testing.B) {
		b.SetBytes(200 << 20)
		for b.Loop() {
			dst := fresh(b)
			file := filepath.Join(snapDir, "t.tar")
			runCmd(b, "tar", "-cf", file, "-C", src, ".")
			runCmd(b, "sync", file)
			runCmd(b, "tar", "-xf", file, "-C", dst)
		}
	})
}
