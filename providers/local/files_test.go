package local_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

func tarOf(t testing.TB, files map[string]string) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	return &buf
}

// A sparse member is extracted with its holes, taking no room
// (sandboxtest checks its content and the limits).
func TestCopyInSparseKeepsHoles(t *testing.T) {
	sb, _ := newSandbox(t, local.Options{Isolation: local.IsolationNone}, sandbox.Spec{})
	if err := sb.CopyIn(context.Background(), ".", sandboxtest.SparseTar(t, "big", 256<<20)); err != nil {
		t.Fatalf("sparse member: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(sb.Dir(), "big"), &st); err != nil || st.Size != 256<<20 || st.Blocks*512 > 1<<20 {
		t.Errorf("sparse member extracted as %d bytes taking %d on disk (%v), want a sparse file of 256 MiB", st.Size, st.Blocks*512, err)
	}
}
