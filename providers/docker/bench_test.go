package docker

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// BenchmarkCreateFirstExec compares sandbox Create followed by the first
// Exec of `true` with `docker run --rm IMAGE true` on the same image.
// Removing the sandbox is outside the timer for the sandbox case (apply
// keeps sandboxes); `docker run --rm` includes its removal, so a third
// variant times Create + Exec + Delete for the like-for-like figure.
func BenchmarkCreateFirstExec(b *testing.B) {
	p := testProvider(b)
	docker := dockerCLI(b)
	ctx := context.Background()
	spec := sandbox.Spec{Address: "sandbox.bench", Lineage: testLineagePrefix + "bench-" + randHex(4), Root: "/workspace", Image: TestImage}

	b.Run("sandbox-create+exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sb, err := p.Create(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec: %v %+v", err, res.ExitCode)
			}
			b.StopTimer()
			if err := sb.Delete(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("sandbox-create+exec+delete", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sb, err := p.Create(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
			if err := sb.Delete(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("docker-run-rm", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			out, err := exec.Command(docker, "run", "--rm", "--network", "none", TestImage, "true").CombinedOutput()
			if err != nil {
				b.Fatalf("docker run: %v: %s", err, out)
			}
		}
	})
}

// benchTree writes nFiles files totalling size bytes under a new
// directory.
func benchTree(b *testing.B, nFiles int, size int64) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "tree")
	per := size / int64(nFiles)
	buf := make([]byte, per)
	for i := 0; i < nFiles; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("e%d", i%7))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		_, _ = rand.Read(buf)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.bin", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// tarDir streams a tar of dir, as materialization does for a local_dir.
func tarDir(dir string) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.AddFS(os.DirFS(dir))
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// BenchmarkCopyTree compares CopyIn of a 5,000-file / 200 MB tree with
// `docker cp` of the same tree into the same container.
func BenchmarkCopyTree(b *testing.B) {
	p := testProvider(b)
	docker := dockerCLI(b)
	ctx := context.Background()
	spec := sandbox.Spec{Address: "sandbox.bench", Lineage: testLineagePrefix + "bench-" + randHex(4), Root: "/workspace", Image: TestImage}
	sbi, err := p.Create(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	defer sbi.Delete(ctx)
	sb := sbi.(*Sandbox)
	tree := benchTree(b, 5000, 200<<20)
	clean := func() {
		if _, _, _, err := sb.run(ctx, "0", []string{"rm", "-rf", "/workspace/tree"}, nil); err != nil {
			b.Fatal(err)
		}
	}
	check := func() {
		out, _, _, err := sb.run(ctx, "0", []string{"sh", "-c", "find /workspace/tree -type f | wc -l"}, nil)
		if err != nil || string(out) != "5000\n" {
			b.Fatalf("copied tree has %q files (%v)", out, err)
		}
	}
	b.Run("sandbox-copyin", func(b *testing.B) {
		b.SetBytes(200 << 20)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			clean()
			b.StartTimer()
			rc := tarDir(tree)
			if err := sb.CopyIn(ctx, "tree", rc); err != nil {
				b.Fatal(err)
			}
			rc.Close()
		}
		b.StopTimer()
		check()
	})
	b.Run("docker-cp", func(b *testing.B) {
		b.SetBytes(200 << 20)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			clean()
			b.StartTimer()
			if out, err := exec.Command(docker, "cp", tree, sb.ID()+":/workspace/tree").CombinedOutput(); err != nil {
				b.Fatalf("docker cp: %v: %s", err, out)
			}
		}
		b.StopTimer()
		check()
	})
}
