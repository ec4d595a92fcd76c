package local_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// FuzzCopyIn feeds arbitrary tar streams to CopyIn: whatever it accepts
// or refuses, nothing may appear outside the workspace.
func FuzzCopyIn(f *testing.F) {
	for _, h := range []*tar.Header{
		{Name: "a/b.txt", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "../x", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "/abs", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../../etc"},
		{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "h", Typeflag: tar.TypeLink, Linkname: "a/b.txt"},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(h)
		tw.Close()
		f.Add(buf.Bytes())
	}
	// A link then a file through it.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."})
	tw.WriteHeader(&tar.Header{Name: "up/escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	f.Add(buf.Bytes())

	// Create/delete churn makes ext4's inode allocator slow; use a tmpfs
	// when there is one.
	stateDir := f.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "agentctl-fuzz-"); err == nil {
		stateDir = d
		f.Cleanup(func() { os.RemoveAll(d) })
	}
	p := local.New(local.Options{Isolation: local.IsolationNone})
	f.Fuzz(func(t *testing.T, data []byte) {
		sb, err := p.Create(context.Background(), sandbox.Spec{Address: "sandbox.fuzz", StateDir: stateDir})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Delete(context.Background())
		sb.CopyIn(context.Background(), "in", bytes.NewReader(data))
		// Only the provider's own entries may exist beside the workspace.
		ents, err := os.ReadDir(sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			switch e.Name() {
			case "agentctl-sandbox.json", "workspace", "tmp":
			default:
				t.Fatalf("CopyIn created %s outside the workspace", e.Name())
			}
		}
		if tmp, _ := os.ReadDir(filepath.Join(sb.ID(), "tmp")); len(tmp) != 0 {
			t.Fatalf("CopyIn wrote into the sandbox's /tmp: %v", tmp)
		}
		if others, _ := os.ReadDir(stateDir); len(others) != 1 {
			t.Fatalf("CopyIn wrote into the state directory: %v", others)
		}
	})
}
