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
	"time"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/sandbox"
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

// warmMemory writes and deletes a 600 MB file in /dev/shm (a tmpfs),
// when there is one: on a virtual machine whose memory balloon hands
// free pages back to the host, a page freed long ago costs a fault in the
// host when it is touched again (a 200 MB copy into new files ran 3-5x
// slower once the pages freed recently were used up), and memory freed
// just before a side runs is reused without it. Every side gets it
// (bench/files.sh does the same between whole commands).
func warmMemory(b *testing.B) {
	b.Helper()
	f, err := os.CreateTemp("/dev/shm", "agentctl-bench-warm-")
	if err != nil {
		return // no /dev/shm
	}
	defer os.Remove(f.Name())
	defer f.Close()
	chunk := make([]byte, 4<<20)
	for range 150 {
		if _, err := f.Write(chunk); err != nil {
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
// cp -a of the same tree (files), and snapshot + restore against tar -c +
// tar -x (snapshots). Each comparison is interleaved: every iteration runs
// both sides, in alternating order, each into a directory never used
// before; nothing is deleted until the benchmark ends (deleting 200 MB
// just before a timed run makes the file system's allocations slower for
// whatever runs next), and each side starts after a sync of what the
// previous one wrote, with the timer stopped. The figures are reported
// per side (s/op metrics) and as their ratio; ns/op is their sum.
//
//	go test -run '^$' -bench BenchmarkTree -benchtime=5x -count=3 ./sandbox/archive/
func BenchmarkTree(b *testing.B) {
	for _, tool := range []string{"cp", "tar", "sync"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not installed: the baselines need it", tool)
		}
	}
	ctx := context.Background()
	base := b.TempDir()
	src := filepath.Join(base, "src")
	benchTree(b, src)
	// Past the digest cache's racy window, so a plan's digest would be
	// remembered (materialize_cached), and settled for hostfs, which
	// copies a file in the kernel only once it last changed 2s ago (real
	// time: the cache's clock, DigestCache.Now, does not move it).
	time.Sleep(2100 * time.Millisecond)
	runCmd(b, "sync")
	n := 0
	fresh := func(b *testing.B) string {
		n++
		d := filepath.Join(base, fmt.Sprintf("run%04d", n))
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		return d
	}
	// tarPath hides the direct tree copy: the local_dir goes in as a tar
	// stream through CopyIn, as before it existed (and as on docker and
	// daytona).
	type tarPath struct{ sandbox.Sandbox }
	entry := manifest.Entry{Kind: manifest.EntryLocalDir, Path: "repo", Source: src}
	materialize := func(b *testing.B, cache *manifest.DigestCache, viaTar bool, alg digest.Algorithm) func(dst string) {
		return func(dst string) {
			h, err := hostfs.NewHostDir(dst)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			var sb sandbox.Sandbox = h
			if viaTar {
				sb = tarPath{h}
			}
			m := manifest.Manifest{Entries: []manifest.Entry{entry}, DigestCache: cache, Digests: alg}
			if _, err := manifest.Materialize(ctx, sb, m, nil, 4); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpA := func(dst string) { runCmd(b, "cp", "-a", src, filepath.Join(dst, "repo")) }
	srcSB, err := hostfs.NewHostDir(src)
	if err != nil {
		b.Fatal(err)
	}
	defer srcSB.Close()
	// A snapshot and its restore as apply makes them: each hashes the
	// file (alg) on its own goroutine, the restore checks the digest.
	snapshotRestore := func(alg digest.Algorithm) func(dst string) {
		return func(dst string) {
			file := filepath.Join(dst, "s.tar")
			info, err := SnapshotWith(ctx, srcSB, "", file, SnapshotOptions{Digest: alg})
			if err != nil {
				b.Fatal(err)
			}
			out := filepath.Join(dst, "out")
			if err := os.Mkdir(out, 0o755); err != nil {
				b.Fatal(err)
			}
			h, err := hostfs.NewHostDir(out)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			if err := RestoreSnapshot(ctx, h, file, info.Digest); err != nil {
				b.Fatal(err)
			}
		}
	}
	tarCX := func(sync bool) func(dst string) {
		return func(dst string) {
			file := filepath.Join(dst, "t.tar")
			out := filepath.Join(dst, "out")
			if err := os.Mkdir(out, 0o755); err != nil {
				b.Fatal(err)
			}
			runCmd(b, "tar", "-cf", file, "-C", src, ".")
			if sync {
				runCmd(b, "sync", file)
			}
			runCmd(b, "tar", "-xf", file, "-C", out)
		}
	}
	type side struct {
		name string
		run  func(dst string)
	}
	compare := func(b *testing.B, sides ...side) {
		b.SetBytes(200 << 20)
		total := make([]time.Duration, len(sides))
		i := 0
		for b.Loop() {
			for k := range sides {
				j := (k + i) % len(sides) // rotate the order every iteration
				b.StopTimer()
				dst := fresh(b)
				runCmd(b, "sync")
				warmMemory(b)
				b.StartTimer()
				start := time.Now()
				sides[j].run(dst)
				total[j] += time.Since(start)
			}
			i++
		}
		for j, s := range sides {
			b.ReportMetric(total[j].Seconds()/float64(i), s.name+"-s/op")
			if j > 0 {
				b.ReportMetric(float64(total[j])/float64(total[0]), s.name+"/"+sides[0].name)
			}
		}
	}
	b.Run("files", func(b *testing.B) {
		// The cache holds the digest as a plan leaves it: apply then
		// copies without hashing.
		cache := manifest.OpenDigestCache(filepath.Join(base, "digests.json"))
		if _, err := manifest.EntryDigests(ctx, manifest.Manifest{Entries: []manifest.Entry{entry}, DigestCache: cache}); err != nil {
			b.Fatal(err)
		}
		compare(b, side{"cp_a", cpA}, side{"materialize", materialize(b, nil, false, digest.BLAKE3)}, side{"materialize_sha256", materialize(b, nil, false, digest.SHA256)},
			side{"materialize_cached", materialize(b, cache, false, digest.BLAKE3)}, side{"materialize_tar", materialize(b, nil, true, digest.BLAKE3)})
	})
	b.Run("snapshots", func(b *testing.B) {
		compare(b, side{"tar_c_tar_x", tarCX(false)}, side{"snapshot_restore", snapshotRestore(digest.BLAKE3)}, side{"snapshot_restore_sha256", snapshotRestore(digest.SHA256)}, side{"tar_c_sync_tar_x", tarCX(true)})
	})
}
