//go:build linux

package mount_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/objtest"
	"github.com/agentctl/agentctl/sandbox/mount"
)

// TestGCSMount: a GCS bucket mounted with a service account key: reads,
// writes reaching the bucket, and a key the server does not know
// refused before anything is mounted.
func TestGCSMount(t *testing.T) {
	objtest.NeedMounts(t)
	g := objtest.StartGCS(t)
	g.CreateBucket("room")
	g.Put("room", "deals/a.txt", "alpha")
	m := newMounter(t)
	o := mount.Owner{Lineage: "L1", Address: "sandbox.g"}
	def := mount.Def{Kind: mount.KindGCS, Path: "data", Bucket: "room", Prefix: "deals", Endpoint: g.Endpoint,
		Secrets: mount.Secrets{CredentialsJSON: g.CredentialsJSON}}
	dir, err := m.Mount(context.Background(), o, def)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Clear(context.Background(), o) })
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "alpha" {
		t.Fatalf("reading through the mount: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("written"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the written file in the bucket", func() bool { got, ok := g.Get("room", "deals/b.txt"); return ok && got == "written" })
	if err := m.Unmount(context.Background(), o, "data"); err != nil {
		t.Fatal(err)
	}

	other := objtest.StartGCS(t) // another service account's key
	bad := def
	bad.Secrets.CredentialsJSON = strings.Replace(other.CredentialsJSON, other.URL, g.URL, 1)
	before := g.Refused.Load()
	if _, err := m.Mount(context.Background(), o, bad); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("mounting with another key: %v, want the credentials refused", err)
	}
	if g.Refused.Load() == before {
		t.Error("the server refused nothing: the key was not checked")
	}
	anon := def
	anon.Secrets = mount.Secrets{}
	if _, err := m.Mount(context.Background(), o, anon); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("mounting without a key: %v, want the credentials refused", err)
	}
}
