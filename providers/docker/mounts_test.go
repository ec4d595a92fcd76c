//go:build linux

package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/objtest"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/mount"
)

// TestStorageMounts: a bucket mounted on this machine is bound into the
// container without any added privilege; the container reads and writes
// it, a read-only one refuses writes, and deleting the container leaves
// the bucket alone.
func TestStorageMounts(t *testing.T) {
	objtest.NeedMounts(t)
	testProvider(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	s.Put(t, "room", "a.txt", "alpha")
	mr := &mount.Mounter{Dir: filepath.Join(t.TempDir(), "mounts"), Environ: os.Environ()}
	spec := testSpec(t)
	o := mount.Owner{Lineage: spec.Lineage, Address: spec.Address}
	def := mount.Def{Kind: mount.KindS3, Bucket: "room", Endpoint: s.URL, Region: s.Region,
		Secrets: mount.Secrets{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey}}
	rw, ro := def, def
	rw.Path, ro.Path, ro.ReadOnly = "data", "ro", true
	for _, d := range []mount.Def{rw, ro} {
		dir, err := mr.Mount(context.Background(), o, d)
		if err != nil {
			t.Fatal(err)
		}
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Path: d.Path, HostDir: dir, ReadOnly: d.ReadOnly})
	}
	t.Cleanup(func() { mr.Clear(context.Background(), o) })
	sb := newSandbox(t, spec)
	if got := execOK(t, sb, "cat /workspace/data/a.txt && echo written > /workspace/data/b.txt"); got != "alpha" {
		t.Errorf("reading through the mount: %q", got)
	}
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: "echo x > /workspace/ro/c.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "Read-only file system") {
		t.Errorf("writing the read-only mount: exit %d, %q; want EROFS", res.ExitCode, res.Stderr)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if got, ok := s.Get("room", "b.txt"); ok && got == "written\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the file written through the mount did not reach the bucket")
		}
	}
	if err := sb.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("room", "a.txt"); !ok {
		t.Error("deleting the container deleted the bucket's a.txt")
	}
}
