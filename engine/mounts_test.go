//go:build linux

package engine

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/internal/objtest"
	"github.com/agentctl/agentctl/providers/builtin"
	"github.com/agentctl/agentctl/sandbox/mount"
	"github.com/agentctl/agentctl/state/local"
)

const mountConfig = `
variable "secret" {
  sensitive = true
}
provider "scripted" {
  script "a" {
    reply {
      call "exec_command" {
        arguments = { cmd = "cat data/in.txt > copied.txt && echo written > data/out.txt && (echo x > ro/new.txt || echo refused > refused.txt)" }
      }
    }
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
manifest "m" {
  file "notes.txt" { content = "workspace file" }
  s3 "data" {
    bucket            = "room"
    prefix            = "deals"
    endpoint          = "%[1]s"
    access_key_id     = env("ROOM_KEY_ID")
    secret_access_key = var.secret
  }
  s3 "ro" {
    bucket            = "room"
    endpoint          = "%[1]s"
    read_only         = true
    access_key_id     = env("ROOM_KEY_ID")
    secret_access_key = var.secret
  }
}
sandbox "s" {
  provider = provider.local
  manifest = manifest.m
}
capability "shell" "default" {}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  sandbox      = sandbox.s
  capabilities = [capability.shell.default]
}
run "r" {
  agent = agent.a
  input = "go"
}
`

func mountEngine(t *testing.T, dir string, s *objtest.S3) *Engine {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(fmt.Sprintf(mountConfig, s.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The machine's cloud variables must not reach rclone.
	environ := append(os.Environ(), "ROOM_KEY_ID="+s.AccessKeyID, "AWS_CA_BUNDLE=/nonexistent/ca.pem", "AWS_SECRET_ACCESS_KEY=not-the-mounts")
	cfg, diags := config.Load(dir, config.Options{Environ: environ, Vars: []string{"secret=" + s.SecretAccessKey}, Registry: builtin.Registry()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sd, err := local.OpenDir(filepath.Join(dir, ".agentctl"))
	if err != nil {
		t.Fatal(err)
	}
	return &Engine{Config: cfg, State: sd, Version: "test", Registry: builtin.Registry(), Environ: environ}
}

// TestMountApplyDestroy: the agent reads and writes through a mount, the
// written file reaches the bucket, a read-only mount refuses writes, the
// plan shows each mount's source, no credential is stored, snapshots
// leave the mounts out, and destroy unmounts.
func TestMountApplyDestroy(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	s.Put(t, "room", "deals/in.txt", "from the bucket")
	dir := t.TempDir()
	e := mountEngine(t, dir, s)
	ctx := context.Background()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]string
	for _, c := range p.Changes {
		if c.Address == "sandbox.s" {
			attrs = c.Attributes
		}
	}
	if got := attrs["mount.data"]; got != "s3 s3://room/deals ("+s.URL+"), read-write" {
		t.Errorf("plan shows mount.data as %q", got)
	}
	if got := attrs["mount.ro"]; !strings.HasSuffix(got, ", read-only") {
		t.Errorf("plan shows mount.ro as %q", got)
	}
	if err := e.Apply(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { destroyAll(t, e) })
	if st.Runs["run.r"].Status != RunCompleted {
		t.Fatalf("run: %s %s", st.Runs["run.r"].Status, st.Runs["run.r"].Error)
	}
	var sessionDir struct{ Dir string }
	if err := json.Unmarshal(st.Sandboxes["sandbox.s"].Session.Data, &sessionDir); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, _ := os.ReadFile(filepath.Join(sessionDir.Dir, "workspace", p))
		return string(b)
	}
	if got := read("copied.txt"); got != "from the bucket" {
		t.Errorf("the agent read %q through the mount", got)
	}
	if got := read("refused.txt"); got != "refused\n" {
		t.Errorf("writing the read-only mount was not refused (refused.txt %q)", got)
	}
	waitBucket(t, s, "deals/out.txt", "written\n")
	if _, ok := s.Get("room", "new.txt"); ok {
		t.Error("a write through the read-only mount reached the bucket")
	}

	// No credential in the state directory's files (rclone's log aside,
	// which holds none either).
	filepath.Walk(e.State.Abs("."), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || strings.Contains(p, string(filepath.Separator)+"sandboxes"+string(filepath.Separator)) {
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), s.SecretAccessKey) || strings.Contains(string(b), s.AccessKeyID) {
			t.Errorf("%s holds a credential", p)
		}
		return nil
	})

	// The snapshot holds the workspace, not the buckets.
	snap := st.Sandboxes["sandbox.s"].Snapshot
	if snap == "" {
		t.Fatal("no snapshot was taken")
	}
	names := tarNames(t, e.State.Abs(snap))
	if !slices.Contains(names, "notes.txt") {
		t.Errorf("the snapshot lacks the workspace's notes.txt: %v", names)
	}
	{
		for _, name := range names {
			if strings.HasPrefix(name, "data/") || strings.HasPrefix(name, "ro/") || name == "data" || name == "ro" {
				t.Errorf("the snapshot holds %s, inside a mount", name)
			}
		}
	}

	// destroy unmounts; the bucket keeps its files.
	hostDirs := []string{}
	for _, p := range []string{"data", "ro"} {
		hostDirs = append(hostDirs, e.mounter().HostDir(mount.Owner{Lineage: st.Lineage, Address: "sandbox.s"}, p))
	}
	dp, err := e.Plan(ctx, st, PlanOptions{Destroy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(ctx, st, dp); err != nil {
		t.Fatal(err)
	}
	for _, d := range hostDirs {
		if e.mounter().Live(d) {
			t.Errorf("%s is still mounted after destroy", d)
		}
	}
	if owners, _ := e.mounter().Owners(); len(owners) != 0 {
		t.Errorf("mount records left after destroy: %v", owners)
	}
	if _, err := os.Stat(sessionDir.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sandbox directory is left: %v", err)
	}
	for key, want := range map[string]string{"deals/in.txt": "from the bucket", "deals/out.txt": "written\n"} {
		if got, _ := s.Get("room", key); got != want {
			t.Errorf("after destroy the bucket's %s is %q, want %q", key, got, want)
		}
	}
}

// TestMountLeftByKill: a mount a killed apply left (recorded, mounted,
// its sandbox never recorded in the state) is cleared by the next apply,
// which mounts anew and works.
func TestMountLeftByKill(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	s.Put(t, "room", "deals/in.txt", "from the bucket")
	dir := t.TempDir()
	e := mountEngine(t, dir, s)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	o := mount.Owner{Lineage: st.Lineage, Address: "sandbox.s"}
	stale, err := e.mounter().Mount(context.Background(), o, mountDef(e.Config.Manifests["m"].Mounts[0]))
	if err != nil {
		t.Fatal(err)
	}
	st = planApply(t, e, PlanOptions{})
	t.Cleanup(func() { destroyAll(t, e) })
	if st.Runs["run.r"].Status != RunCompleted {
		t.Fatalf("run: %s %s", st.Runs["run.r"].Status, st.Runs["run.r"].Error)
	}
	waitBucket(t, s, "deals/out.txt", "written\n")
	// The leftover was a first apply's, killed before it wrote the state:
	// its lineage is not the state's, and it is cleared all the same.
	if e.mounter().Live(stale) {
		t.Error("the mount the killed apply left is still up")
	}
	owners, err := e.mounter().Owners()
	if err != nil || len(owners) != 1 || owners[0] != (mount.Owner{Lineage: st.Lineage, Address: "sandbox.s"}) {
		t.Errorf("mount records after apply: %v, %v; want sandbox.s's of lineage %s", owners, err, st.Lineage)
	}
}

// destroyAll destroys what a test applied: removing the test's directory
// must not reach into a bucket through a mount left up.
func destroyAll(t *testing.T, e *Engine) {
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Error(err)
		return
	}
	p, err := e.Plan(context.Background(), st, PlanOptions{Destroy: true})
	if err == nil {
		err = e.Apply(context.Background(), st, p)
	}
	if err != nil {
		t.Errorf("destroying: %v", err)
	}
}

func waitBucket(t *testing.T, s *objtest.S3, key, want string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, ok := s.Get("room", key); ok && got == want {
			return
		}
	}
	got, _ := s.Get("room", key)
	t.Fatalf("the bucket's %s is %q, want %q", key, got, want)
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatalf("reading snapshot %s: %v", path, err)
		}
		names = append(names, strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/"))
	}
}

// TestMountsExample applies examples/mounts.hcl against the test S3
// server as its comments say: the agent reads the read-only data room,
// its write there is refused, and its summary reaches the bucket.
func TestMountsExample(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	s.Put(t, "room", "deals/acme/terms.md", "Price: 12.5M EUR\n")
	s.Put(t, "room", "deals/acme/risks.md", "Key customer is 35% of revenue.\n")
	s.Put(t, "room", "deals/acme/financials.csv", "year,revenue\n2024,6.8\n")
	src, err := os.ReadFile("../examples/mounts.hcl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	environ := append(os.Environ(), "ROOM_ACCESS_KEY_ID="+s.AccessKeyID, "ROOM_SECRET_ACCESS_KEY="+s.SecretAccessKey)
	// The engine's tests run without the namespaced sandbox's init.
	cfg, diags := config.Load(dir, config.Options{Environ: environ, Vars: []string{"endpoint=" + s.URL, "isolation=none"}, Registry: builtin.Registry()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sd, err := local.OpenDir(filepath.Join(dir, ".agentctl"))
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Config: cfg, State: sd, Version: "test", Registry: builtin.Registry(), Environ: environ}
	st := planApply(t, e, PlanOptions{})
	t.Cleanup(func() { destroyAll(t, e) })
	if r := st.Runs["run.summary"]; r.Status != RunCompleted {
		t.Fatalf("run.summary: %s %s", r.Status, r.Error)
	}
	waitBucketPrefix(t, s, "summaries/acme.md", "# Acme: summary")
	if got, _ := s.Get("room", "deals/acme/terms.md"); got != "Price: 12.5M EUR\n" {
		t.Errorf("the read-only data room changed: terms.md is %q", got)
	}
}

func waitBucketPrefix(t *testing.T, s *objtest.S3, key, prefix string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, ok := s.Get("room", key); ok && strings.HasPrefix(got, prefix) {
			return
		}
	}
	got, _ := s.Get("room", key)
	t.Fatalf("the bucket's %s is %q, want it to start with %q", key, got, prefix)
}

// TestMountPlanWithoutRclone: a sandbox to be made with a mount on a
// machine without rclone fails at plan, naming the mount and what to
// install; nothing is made.
func TestMountPlanWithoutRclone(t *testing.T) {
	s := objtest.StartS3(t)
	dir := t.TempDir()
	e := mountEngine(t, dir, s)
	e.Environ = append(e.Environ, "PATH="+t.TempDir())
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Plan(context.Background(), st, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "rclone is not installed") || !strings.Contains(err.Error(), "s3 mount at data (") ||
		!strings.Contains(err.Error(), "main.hcl:") {
		t.Fatalf("plan: %v; want rclone missing, located at the data mount", err)
	}
	if _, err := os.Stat(e.State.Abs("mounts")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("plan made %s: %v", e.State.Abs("mounts"), err)
	}
}
