//go:build linux

package mount_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/internal/objtest"
	"github.com/agentctl/agentctl/sandbox/mount"
)

// TestBoxMount: a Box folder mounted read-only with an access token, by
// rclone unchanged (it reaches api.box.com through the test's proxy):
// files and subfolders read through the mount, writes refused, and a
// wrong token refused before anything is mounted.
func TestBoxMount(t *testing.T) {
	objtest.NeedMounts(t)
	b := objtest.StartBox(t)
	room := b.Folder("0", "Deal Room")
	acme := b.Folder(room, "acme")
	b.File(acme, "terms.md", "price 12.5M")
	q1 := b.Folder(acme, "q1")
	b.File(q1, "revenue.csv", "month,revenue\njan,1.2\n")
	m := newMounter(t)
	m.Environ = append(m.Environ, b.Env...)
	o := mount.Owner{Lineage: "L1", Address: "sandbox.bx"}
	def := mount.Def{Kind: mount.KindBox, Path: "data", Bucket: room, Prefix: "acme", ReadOnly: true,
		Secrets: mount.Secrets{AccessToken: b.Token}}
	dir, err := m.Mount(context.Background(), o, def)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Clear(context.Background(), o) })
	if got, err := os.ReadFile(filepath.Join(dir, "terms.md")); err != nil || string(got) != "price 12.5M" {
		t.Fatalf("reading through the mount: %q, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "q1", "revenue.csv")); err != nil || !strings.HasPrefix(string(got), "month,revenue") {
		t.Fatalf("reading a subfolder's file: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("writing a read-only mount: %v, want EROFS", err)
	}
	if err := m.Unmount(context.Background(), o, "data"); err != nil {
		t.Fatal(err)
	}

	bad := def
	bad.Secrets.AccessToken = "not-the-token"
	before := b.Refused.Load()
	if _, err := m.Mount(context.Background(), o, bad); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("mounting with a wrong token: %v, want the credentials refused", err)
	}
	if b.Refused.Load() == before {
		t.Error("the service refused nothing: the token was not checked")
	}
	missing := def
	missing.Bucket = "999999"
	if _, err := m.Mount(context.Background(), o, missing); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("mounting a missing folder: %v, want it to say so", err)
	}
}
