package docker

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/archive"
)

// callWithin runs f and fails the test if it has not returned when its
// context's deadline passes.
func callWithin(t *testing.T, what string, f func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatalf("%s did not return before its deadline", what)
	}
	return nil
}

// mknodSpec is the test spec with MKNOD added back (cap_add), so a
// command can create the device nodes the tests need.
func mknodSpec(t *testing.T) sandbox.Spec {
	spec := testSpec(t)
	spec.Settings = &SandboxSettings{CapAdd: []string{"MKNOD"}}
	return spec
}

// TestSpecialFiles: FIFOs and devices a command creates in a container's
// workspace are refused by the file methods and tools, at once, with the
// same message as on other providers, and left as they are.
func TestSpecialFiles(t *testing.T) {
	sb := newSandbox(t, mknodSpec(t))
	execOK(t, sb, "mkfifo pipe && mknod zero c 1 5 && ln -s pipe link")
	for _, n := range []string{"pipe", "zero", "link"} {
		err := callWithin(t, "ReadFile "+n, func(ctx context.Context) error {
			_, err := sb.ReadFile(ctx, n, 0)
			return err
		})
		if !errors.Is(err, sandbox.ErrNotRegular) {
			t.Errorf("ReadFile(%s) = %v, want ErrNotRegular", n, err)
		}
		err = callWithin(t, "WriteFile "+n, func(ctx context.Context) error {
			return sb.WriteFile(ctx, n, []byte("x"), 0o644)
		})
		if !errors.Is(err, sandbox.ErrNotRegular) {
			t.Errorf("WriteFile(%s) = %v, want ErrNotRegular", n, err)
		}
	}
	ws := &sandbox.Workspace{Sandbox: sb}
	opts := tools.FilesystemOptions{Root: "/workspace"}
	err := callWithin(t, "apply_patch", func(ctx context.Context) error {
		_, err := tools.NewApplyPatch(ws, opts).Call(ctx, "*** Begin Patch\n*** Add File: pipe\n+x\n*** End Patch\n")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "it is a named pipe (FIFO), not a regular file") {
		t.Errorf("apply_patch on a FIFO: %v", err)
	}
	err = callWithin(t, "view_image", func(ctx context.Context) error {
		_, err := tools.NewViewImage(ws, opts).Call(ctx, `{"path": "zero"}`)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "is a character device, not an image file") {
		t.Errorf("view_image on a device: %v", err)
	}
	if out := execOK(t, sb, "test -p pipe && test -c zero && echo intact"); out != "intact\n" {
		t.Errorf("special files after the tools: %q", out)
	}
}

// TestSnapshotBounds: a container's snapshot leaves FIFOs and devices out
// (so it restores), holds holes as zeros, and fails past its limit naming
// the largest files.
func TestSnapshotBounds(t *testing.T) {
	ctx := context.Background()
	spec := mknodSpec(t)
	sb := newSandbox(t, spec)
	execOK(t, sb, "mkfifo pipe && mknod zero c 1 5 && truncate -s 8M sparse.img && echo hi > notes.txt")
	dst := filepath.Join(t.TempDir(), "snapshots", "sandbox.test.tar")
	_, err := archive.SnapshotWith(ctx, sb, "", dst, archive.SnapshotOptions{MaxBytes: 4 << 20})
	if !errors.Is(err, archive.ErrSnapshotTooLarge) || !strings.Contains(err.Error(), "sparse.img (8 MiB)") || !strings.Contains(err.Error(), "4 MiB") {
		t.Fatalf("snapshot over its limit: %v", err)
	}
	info, err := archive.Snapshot(ctx, sb, "", nil, dst)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size < 8<<20 {
		t.Errorf("snapshot of %d bytes: docker archives hold holes as zeros", info.Size)
	}
	fresh := newSandbox(t, spec)
	if err := archive.Restore(ctx, fresh, dst); err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, fresh, "cat notes.txt; stat -c %s sparse.img; ls"); out != "hi\n8388608\nnotes.txt\nsparse.img\n" {
		t.Errorf("restored workspace: %q", out)
	}
}
