//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/clitest"
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

const killConfig = `
variable "secret" {
  sensitive = true
}
provider "local" {}
provider "scripted" {
  script "a" {
    reply {
      call "exec_command" {
        arguments = { cmd = "cat data/in.txt > copy.txt && sleep 4 && echo done > data/out.txt" }
      }
    }
    reply { text = "done" }
  }
}
manifest "m" {
  s3 "data" {
    bucket            = "room"
    endpoint          = "%s"
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

// TestStorageMountsKill: agentctl killed (SIGKILL) during apply with a
// mount up; the next apply works, with one mount, no stale one and no
// credential in ps or the state directory; destroy leaves nothing.
func TestStorageMountsKill(t *testing.T) {
	objtest.NeedMounts(t)
	s := objtest.StartS3(t)
	s.CreateBucket(t, "room")
	s.Put(t, "room", "in.txt", "alpha")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(fmt.Sprintf(killConfig, s.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &clitest.CLI{T: t, Bin: agentctlBin.Path(t), Dir: dir, File: "main.hcl",
		Env: []string{"ROOM_KEY_ID=" + s.AccessKeyID, "AGENTCTL_VAR_secret=" + s.SecretAccessKey, "AWS_CA_BUNDLE=/nonexistent/ca.pem"}}
	t.Cleanup(func() { c.Run("destroy", "-auto-approve") })
	cmd := c.Command(context.Background(), "apply", "-auto-approve")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed while the command runs, the mount up.
	waitUntil(t, "the run's command", func() bool {
		b, err := os.ReadFile(filepath.Join(workspaceOf(t, dir), "copy.txt"))
		return err == nil && string(b) == "alpha"
	})
	cmd.Process.Kill()
	cmd.Wait()
	if n := len(rcloneMounts(t, dir)); n != 1 {
		t.Fatalf("%d rclone mounts after the kill, want the one left up", n)
	}

	c.OK("apply", "-auto-approve")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if got, ok := s.Get("room", "out.txt"); ok && got == "done\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the resumed run's write did not reach the bucket")
		}
	}
	if n := len(rcloneMounts(t, dir)); n != 1 {
		t.Errorf("%d rclone mounts after the second apply, want 1", n)
	}
	ps, _ := exec.Command("ps", "-eo", "args").Output()
	if strings.Contains(string(ps), s.SecretAccessKey) {
		t.Error("ps shows the secret")
	}
	filepath.Walk(filepath.Join(dir, ".agentctl"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && !strings.Contains(p, "/sandboxes/") {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), s.SecretAccessKey) {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})

	c.OK("destroy", "-auto-approve")
	if m := rcloneMounts(t, dir); len(m) != 0 {
		t.Errorf("mounts left after destroy: %v", m)
	}
	if strings.Contains(psArgs(t), dir) {
		t.Error("an rclone process is left after destroy")
	}
	if got, _ := s.Get("room", "in.txt"); got != "alpha" {
		t.Errorf("the bucket's in.txt is %q after destroy", got)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// workspaceOf is the workspace directory of the only sandbox under dir
// ("" until there is one).
func workspaceOf(t *testing.T, dir string) string {
	ws, _ := filepath.Glob(filepath.Join(dir, ".agentctl", "*", "sandboxes", "sandbox.s-*", "workspace"))
	if len(ws) == 0 {
		ws, _ = filepath.Glob(filepath.Join(dir, ".agentctl", "sandboxes", "sandbox.s-*", "workspace"))
	}
	if len(ws) != 1 {
		return filepath.Join(dir, "none")
	}
	return ws[0]
}

// rcloneMounts are the FUSE mounts under dir made by rclone itself (not
// the binds of them).
func rcloneMounts(t *testing.T, dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], dir) && strings.Contains(l, " fuse.rclone ") && strings.Contains(f[4], "/mounts/") {
			out = append(out, f[4])
		}
	}
	return out
}

func psArgs(t *testing.T) string {
	out, err := exec.Command("ps", "-eo", "args").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
