//go:build linux

package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/objtest"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/mount"
)

// TestStorageMounts: a bucket mounted on the host is seen at its path in
// the workspace, with both isolations; writes reach the bucket, a
// read-only mount refuses them (EROFS), and deleting the sandbox leaves
// the bucket's files alone.
func TestStorageMounts(t *testing.T) {
	objtest.NeedMounts(t)
	for _, iso := range []string{local.IsolationNamespaces, local.IsolationNone} {
		t.Run(iso, func(t *testing.T) {
			s := objtest.StartS3(t)
			s.CreateBucket(t, "room")
			s.Put(t, "room", "a.txt", "alpha")
			mr := &mount.Mounter{Dir: filepath.Join(t.TempDir(), "mounts"), Environ: os.Environ()}
			o := mount.Owner{Lineage: "L", Address: "sandbox.m"}
			def := mount.Def{Kind: mount.KindS3, Bucket: "room", Endpoint: s.URL, Region: s.Region,
				Secrets: mount.Secrets{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey}}
			rw, ro := def, def
			rw.Path, ro.Path, ro.ReadOnly = "data", "ro", true
			var mounts []sandbox.Mount
			for _, d := range []mount.Def{rw, ro} {
				dir, err := mr.Mount(context.Background(), o, d)
				if err != nil {
					t.Fatal(err)
				}
				mounts = append(mounts, sandbox.Mount{Path: d.Path, HostDir: dir, ReadOnly: d.ReadOnly})
			}
			t.Cleanup(func() { mr.Clear(context.Background(), o) })
			sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{Address: "sandbox.m", Root: "/workspace", Mounts: mounts})
			cd := ""
			if iso == local.IsolationNone {
				cd = "cd " + sb.Dir() + " && "
			} else {
				cd = "cd /workspace && "
			}
			res := sh(t, sb, cd+"cat data/a.txt && echo written > data/b.txt && echo x > ro/c.txt")
			if !strings.HasPrefix(string(res.Stdout)+string(res.Stderr), "alpha") {
				t.Errorf("reading through the mount: %q %q", res.Stdout, res.Stderr)
			}
			if res.ExitCode == 0 || !strings.Contains(string(res.Stdout)+string(res.Stderr), "Read-only file system") {
				t.Errorf("writing the read-only mount: exit %d, %q %q; want EROFS", res.ExitCode, res.Stdout, res.Stderr)
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
			for _, key := range []string{"a.txt", "b.txt"} {
				if _, ok := s.Get("room", key); !ok {
					t.Errorf("deleting the sandbox deleted the bucket's %s", key)
				}
			}
		})
	}
}
