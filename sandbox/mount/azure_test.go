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
	"time"

	"github.com/agentctl/agentctl/internal/objtest"
	"github.com/agentctl/agentctl/sandbox/mount"
)

// TestAzureMountSAS: a container mounted with a SAS token at an
// emulator-like endpoint: reads, writes reaching the container, and a
// token the account did not sign refused before anything is mounted.
func TestAzureMountSAS(t *testing.T) {
	objtest.NeedMounts(t)
	a := objtest.StartAzure(t, "dealroom", "c2VjcmV0LWFjY291bnQta2V5LW9mLXRoZS10ZXN0cw==")
	a.CreateContainer("room")
	a.Put("room", "deals/a.txt", "alpha")
	m := newMounter(t)
	o := mount.Owner{Lineage: "L1", Address: "sandbox.az"}
	def := mount.Def{Kind: mount.KindAzure, Path: "data", Account: "dealroom", Bucket: "room", Prefix: "deals", Endpoint: a.URL,
		Secrets: mount.Secrets{SASToken: a.SAS("room", "racwdl", time.Now().Add(time.Hour))}}
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
	waitFor(t, "the written file in the container", func() bool { got, ok := a.Get("room", "deals/b.txt"); return ok && got == "written" })
	if err := m.Unmount(context.Background(), o, "data"); err != nil {
		t.Fatal(err)
	}

	other := objtest.StartAzure(t, "dealroom", "YW5vdGhlci1rZXk=")
	forged := def
	forged.Secrets.SASToken = other.SAS("room", "racwdl", time.Now().Add(time.Hour))
	anon := def
	anon.Secrets = mount.Secrets{}
	readOnlySAS := def
	readOnlySAS.Secrets.SASToken = a.SAS("room", "rl", time.Now().Add(-time.Minute))
	cases := []struct {
		name string
		def  mount.Def
		want string
	}{
		{"another key's SAS", forged, "the store refused the credentials"},
		{"an expired SAS", readOnlySAS, "the store refused the credentials"},
		{"no credential", anon, "does not exist or is private"},
	}
	for _, tc := range cases {
		name, before := tc.name, a.Refused.Load()
		_, err := m.Mount(context.Background(), o, tc.def)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("mounting with %s: %v, want an error saying %q", name, err, tc.want)
		}
		if a.Refused.Load() == before {
			t.Errorf("%s: the service refused nothing: the credential was not checked", name)
		}
		if strings.Contains(err.Error(), "sig=") {
			t.Errorf("%s: the error shows the signature: %v", name, err)
		}
	}
}

// TestAzureMountEmulatorKey: the storage emulator's account and key at
// its endpoint sign every request (Shared Key); a read-only mount
// refuses writes.
func TestAzureMountEmulatorKey(t *testing.T) {
	objtest.NeedMounts(t)
	a := objtest.StartAzure(t, mount.AzureEmulatorAccount, mount.AzureEmulatorKey)
	a.CreateContainer("room")
	a.Put("room", "a.txt", "alpha")
	m := newMounter(t)
	o := mount.Owner{Lineage: "L1", Address: "sandbox.azk"}
	def := mount.Def{Kind: mount.KindAzure, Path: "data", Account: mount.AzureEmulatorAccount, Bucket: "room", Endpoint: a.URL, ReadOnly: true,
		Secrets: mount.Secrets{AccountKey: mount.AzureEmulatorKey}}
	dir, err := m.Mount(context.Background(), o, def)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Clear(context.Background(), o) })
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "alpha" {
		t.Fatalf("reading through the mount: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("writing a read-only mount: %v, want EROFS", err)
	}
	missing := def
	missing.Bucket = "nope"
	if _, err := m.Mount(context.Background(), o, missing); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("mounting a missing container: %v, want it to say the container does not exist", err)
	}
}

// TestAzureMountAccountKey: with an account key and no endpoint, rclone
// signs (Shared Key) its requests to Azure's own
// https://ACCOUNT.blob.core.windows.net, which the test serves through
// its proxy; a wrong key is refused.
func TestAzureMountAccountKey(t *testing.T) {
	objtest.NeedMounts(t)
	const key = "a2V5LW9mLXRoZS1kZWFscm9vbS1hY2NvdW50"
	a, err := objtest.NewAzure("dealroom", key)
	if err != nil {
		t.Fatal(err)
	}
	imp := objtest.Impersonate(t, a, "dealroom.blob.core.windows.net")
	t.Cleanup(func() {
		for _, v := range a.Violations() {
			t.Errorf("request outside the specification: %s", v)
		}
	})
	a.CreateContainer("room")
	a.Put("room", "a.txt", "alpha")
	m := newMounter(t)
	m.Environ = append(m.Environ, imp.Env...)
	o := mount.Owner{Lineage: "L1", Address: "sandbox.azkey"}
	def := mount.Def{Kind: mount.KindAzure, Path: "data", Account: "dealroom", Bucket: "room", Secrets: mount.Secrets{AccountKey: key}}
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
	waitFor(t, "the written file in the container", func() bool { got, ok := a.Get("room", "b.txt"); return ok && got == "written" })
	if err := m.Unmount(context.Background(), o, "data"); err != nil {
		t.Fatal(err)
	}
	wrong := def
	wrong.Secrets.AccountKey = "d3Jvbmcta2V5"
	before := a.Refused.Load()
	if _, err := m.Mount(context.Background(), o, wrong); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("mounting with a wrong key: %v, want the credentials refused", err)
	}
	if a.Refused.Load() == before {
		t.Error("the service refused nothing: the key was not checked")
	}
}
