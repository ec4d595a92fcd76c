//go:build linux

package mount_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/objtest"
	"github.com/agentctl/agentctl/sandbox/mount"
)

func newMounter(t *testing.T) *mount.Mounter {
	// The machine's cloud variables are not the mount's; one that names
	// an unreadable CA bundle breaks rclone if it reaches it.
	env := append(os.Environ(), "AWS_CA_BUNDLE=/nonexistent/ca.pem", "AWS_ACCESS_KEY_ID=not-the-mounts")
	return &mount.Mounter{Dir: filepath.Join(t.TempDir(), "mounts"), Environ: env, Timeout: 20 * time.Second}
}

func s3Def(s *objtest.S3, bucket string) mount.Def {
	return mount.Def{Kind: mount.KindS3, Path: "data", Bucket: bucket, Endpoint: s.URL, Region: s.Region,
		Secrets: mount.Secrets{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey}}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestS3MountReadWrite(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	s.Put(t, "room", "deals/a.txt", "alpha")
	m := newMounter(t)
	o := mount.Owner{Lineage: "L1", Address: "sandbox.box"}
	def := s3Def(s, "room")
	def.Prefix = "deals"
	dir, err := m.Mount(context.Background(), o, def)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Clear(context.Background(), o) })
	b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	if err != nil || string(b) != "alpha" {
		t.Fatalf("reading through the mount: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte("cited"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the written file in the bucket", func() bool { got, ok := s.Get("room", "deals/summary.md"); return ok && got == "cited" })

	// The secret is in no process's arguments.
	out, err := exec.Command("ps", "-eo", "args").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), s.SecretAccessKey) || strings.Contains(string(out), s.AccessKeyID) {
		t.Errorf("ps shows a credential:\n%s", out)
	}
	if !strings.Contains(string(out), dir) {
		t.Errorf("no rclone process for %s in ps:\n%s", dir, out)
	}
	recs, _ := filepath.Glob(filepath.Join(m.Dir, "*"))
	for _, r := range recs {
		if fi, err := os.Stat(r); err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(r)
			if strings.Contains(string(b), s.SecretAccessKey) {
				t.Errorf("%s holds the secret", r)
			}
		}
	}

	if err := m.Unmount(context.Background(), o, "data"); err != nil {
		t.Fatal(err)
	}
	if m.Live(dir) {
		t.Error("still mounted after Unmount")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount point is left: %v", err)
	}
	if got, _ := s.Get("room", "deals/a.txt"); got != "alpha" {
		t.Errorf("unmounting changed the bucket: a.txt = %q", got)
	}
}

func TestS3MountReadOnly(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	s.Put(t, "room", "a.txt", "alpha")
	m := newMounter(t)
	o := mount.Owner{Lineage: "L1", Address: "sandbox.ro"}
	def := s3Def(s, "room")
	def.ReadOnly = true
	dir, err := m.Mount(context.Background(), o, def)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Clear(context.Background(), o) })
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "alpha" {
		t.Fatalf("reading: %q, %v", b, err)
	}
	err = os.WriteFile(filepath.Join(dir, "b.txt"), []byte("x"), 0o644)
	if !errors.Is(err, syscall.EROFS) {
		t.Fatalf("writing a read-only mount: %v, want EROFS", err)
	}
}

func TestMountFailures(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	o := mount.Owner{Lineage: "L1", Address: "sandbox.bad"}
	wrong := s3Def(s, "room")
	wrong.Secrets.SecretAccessKey = "not-the-secret"
	unknown := s3Def(s, "room")
	unknown.Secrets.AccessKeyID = "AKIAUNKNOWN"
	anonymous := s3Def(s, "room")
	anonymous.Secrets = mount.Secrets{}
	missing := s3Def(s, "no-such-bucket")
	unreachable := s3Def(s, "room")
	unreachable.Endpoint = "http://127.0.0.1:1"
	cases := []struct {
		name string
		def  mount.Def
		want string
	}{
		{"wrong secret", wrong, "refused the credentials"},
		{"unknown key", unknown, "refused the credentials"},
		{"no credentials", anonymous, "refused the credentials"},
		{"missing bucket", missing, "bucket does not exist"},
		{"unreachable", unreachable, "endpoint is unreachable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMounter(t)
			before := s.Refused.Load()
			_, err := m.Mount(context.Background(), o, tc.def)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), s.SecretAccessKey) {
				t.Errorf("the error holds the secret: %v", err)
			}
			if strings.Contains(tc.want, "credentials") && s.Refused.Load() == before {
				t.Error("the server refused nothing: the credentials were not checked")
			}
			left, _ := filepath.Glob(filepath.Join(m.Dir, "*"))
			for _, l := range left {
				if !strings.HasSuffix(l, ".log") {
					t.Errorf("a failed mount left %s", l)
				}
			}
		})
	}
}

// TestClearAfterKill is what the next apply does after agentctl was
// killed with a mount up: the record it wrote first finds the mount, and
// clearing it ends rclone and removes the mount point.
func TestClearAfterKill(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	m := newMounter(t)
	o := mount.Owner{Lineage: "L1", Address: "sandbox.box"}
	dir, err := m.Mount(context.Background(), o, s3Def(s, "room"))
	if err != nil {
		t.Fatal(err)
	}
	// A later command knows only the directory.
	next := &mount.Mounter{Dir: m.Dir, Environ: os.Environ()}
	paths, err := next.Recorded(o)
	if err != nil || len(paths) != 1 || paths[0] != "data" {
		t.Fatalf("Recorded = %v, %v", paths, err)
	}
	// Mounting the same path again replaces the leftover.
	dir2, err := next.Mount(context.Background(), o, s3Def(s, "room"))
	if err != nil {
		t.Fatal(err)
	}
	if dir2 != dir || !next.Live(dir) {
		t.Fatalf("remount at %s (live %v), want %s", dir2, next.Live(dir2), dir)
	}
	if err := next.Clear(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if next.Live(dir) {
		t.Error("still mounted after Clear")
	}
	if paths, _ := next.Recorded(o); len(paths) != 0 {
		t.Errorf("records left: %v", paths)
	}
	out, _ := exec.Command("ps", "-eo", "args").Output()
	if strings.Contains(string(out), dir) {
		t.Errorf("an rclone process is left:\n%s", out)
	}
}

// TestS3CompatibleKinds: r2 and s3_files mounts speak the same S3 API,
// through their own provider settings, to an endpoint of their shape.
func TestS3CompatibleKinds(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	s.Put(t, "room", "a.txt", "alpha")
	for _, kind := range []string{mount.KindR2, mount.KindS3Files} {
		t.Run(kind, func(t *testing.T) {
			m := newMounter(t)
			o := mount.Owner{Lineage: "L1", Address: "sandbox." + kind}
			def := s3Def(s, "room")
			def.Kind = kind
			dir, err := m.Mount(context.Background(), o, def)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Clear(context.Background(), o)
			if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "alpha" {
				t.Fatalf("reading through the %s mount: %q, %v", kind, b, err)
			}
		})
	}
}

// TestRemountAfterRcloneEnded: a mount whose rclone ended (killed, or
// the machine restarted) is not live, and mounting it again replaces the
// dead mount point.
func TestRemountAfterRcloneEnded(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	s.Put(t, "room", "a.txt", "alpha")
	m := newMounter(t)
	o := mount.Owner{Lineage: "L1", Address: "sandbox.box"}
	dir, err := m.Mount(context.Background(), o, s3Def(s, "room"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Clear(context.Background(), o) })
	out, err := exec.Command("pkill", "-KILL", "-f", "rclone mount .* "+dir+" ").CombinedOutput()
	if err != nil {
		t.Fatalf("killing rclone: %v %s", err, out)
	}
	waitFor(t, "the mount to go dead", func() bool { return !m.Live(dir) })
	if _, err := m.Mount(context.Background(), o, s3Def(s, "room")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "alpha" {
		t.Fatalf("reading after mounting again: %q, %v", b, err)
	}
}

func TestCleanEnviron(t *testing.T) {
	got := mount.CleanEnviron([]string{"PATH=/bin", "AWS_CA_BUNDLE=/x.pem", "AWS_ACCESS_KEY_ID=k", "GOOGLE_APPLICATION_CREDENTIALS=/g.json",
		"RCLONE_CONFIG=/c", "OPENAI_API_KEY=sk", "AGENTCTL_VAR_secret=s", "HTTPS_PROXY=http://p:3128", "HOME=/root"})
	want := []string{"PATH=/bin", "HTTPS_PROXY=http://p:3128", "HOME=/root"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("CleanEnviron = %v, want %v", got, want)
	}
}
