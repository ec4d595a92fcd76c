package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkOneShot measures whole agentctl processes, one sub-benchmark
// after the other in one run (use -count and benchstat to interleave):
//
//   - version: start-up alone (the runtime and package initialization);
//   - exec-true: `agentctl exec sandbox.x -- true` with one namespaced
//     local sandbox, applied first: two processes start (the command and
//     the sandbox's init), the state is locked and read;
//   - bwrap-reference: `bwrap --unshare-all --ro-bind / / true`, the
//     same namespaces made by a small C program (skipped without bwrap).
//
// The binary is $AGENTCTL_BENCH_EXECUTABLE (go build -o DIR/agentctl
// ./cmd/agentctl); without it, this test binary acting as agentctl,
// which also initializes the test dependencies. See
// docs/benchmarks-local.md, "One-shot exec".
func BenchmarkOneShot(b *testing.B) {
	bin := os.Getenv("AGENTCTL_BENCH_EXECUTABLE")
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		bin = filepath.Join(b.TempDir(), "agentctl")
		if err := os.Symlink(exe, bin); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	config := `provider "local" {}

manifest "m" {
  file "hello.txt" {
    content = "hello"
  }
}

sandbox "x" {
  provider = provider.local
  manifest = manifest.m
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(config), 0o644); err != nil {
		b.Fatal(err)
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		return cmd
	}
	if out, err := command(bin, "apply", "-auto-approve", "-no-color").CombinedOutput(); err != nil {
		b.Skipf("apply failed (namespaced local sandboxes may be unavailable here): %v\n%s", err, out)
	}
	b.Cleanup(func() {
		if out, err := command(bin, "destroy", "-auto-approve", "-no-color").CombinedOutput(); err != nil {
			b.Errorf("destroy: %v\n%s", err, out)
		}
	})
	run := func(b *testing.B, name string, args ...string) {
		for b.Loop() {
			if out, err := command(name, args...).CombinedOutput(); err != nil {
				b.Fatalf("%s %v: %v\n%s", name, args, err, out)
			}
		}
	}
	b.Run("version", func(b *testing.B) { run(b, bin, "version") })
	b.Run("exec-true", func(b *testing.B) { run(b, bin, "exec", "sandbox.x", "--", "true") })
	b.Run("bwrap-reference", func(b *testing.B) {
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			b.Skip("bwrap is not installed (Debian: apt-get install bubblewrap)")
		}
		run(b, bwrap, "--unshare-all", "--ro-bind", "/", "/", "true")
	})
}
