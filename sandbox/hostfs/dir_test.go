//go:build unix

package hostfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// fixture builds a parent directory holding a workspace "ws" and a
// sibling workspace "sibling" with a secret in it.
func fixture(t *testing.T) (parent, ws string) {
	t.Helper()
	parent = t.TempDir()
	ws = filepath.Join(parent, "ws")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755))
	must(os.MkdirAll(filepath.Join(parent, "sibling"), 0o755))
	must(os.WriteFile(filepath.Join(parent, "sibling", "secret.txt"), []byte("secret"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "file.txt"), []byte("hello"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "a", "b", "c.txt"), []byte("deep"), 0o644))
	links := map[string]string{
		"link_in":          "file.txt",
		"link_dir":         "a",
		"link_etc":         "/etc",
		"link_passwd":      "/etc/passwd",
		"link_abs_in":      filepath.Join(ws, "file.txt"),
		"link_sibling":     "../sibling",
		"link_sibling_abs": filepath.Join(parent, "sibling"),
		"a/rel_ok":         "../file.txt",
		"a/chain":          "../link_hop",
		"link_hop":         "link_sibling",
		"a/b/deep_out":     "../../../sibling/secret.txt",
		"a/b/deep_in":      "../../a/b/c.txt",
		"dangling":         "nothere",
		"dangling_out":     "../nothere",
		"loop1":            "loop2",
		"loop2":            "loop1",
		"proc_self":        "/proc/self/root",
		"dot":              ".",
	}
	for name, target := range links {
		must(os.Symlink(target, filepath.Join(ws, filepath.FromSlash(name))))
	}
	return parent, ws
}

func TestDirResolvesBeneathRoot(t *testing.T) {
	_, ws := fixture(t)
	const (
		ok = iota
		escape
		notExist
		otherErr
	)
	tests := []struct {
		p    string
		want int
		data string
	}{
		{"file.txt", ok, "hello"},
		{"a/b/c.txt", ok, "deep"},
		{"/file.txt", escape, ""}, // absolute: sandbox.CleanPath without root refuses
		{"../sibling/secret.txt", escape, ""},
		{"a/../../sibling/secret.txt", escape, ""},
		{"link_in", ok, "hello"},
		{"link_dir/b/c.txt", ok, "deep"},
		{"a/rel_ok", ok, "hello"},
		{"a/b/deep_in", ok, "deep"},
		{"dot/dot/file.txt", ok, "hello"},
		{"link_etc/passwd", escape, ""},
		{"link_passwd", escape, ""},
		{"link_abs_in", escape, ""}, // absolute targets are refused even when they point inside
		{"link_sibling/secret.txt", escape, ""},
		{"link_sibling_abs/secret.txt", escape, ""},
		{"a/chain/secret.txt", escape, ""},
		{"link_hop/secret.txt", escape, ""},
		{"a/b/deep_out", escape, ""},
		{"dangling", notExist, ""},
		{"dangling_out", escape, ""},
		{"proc_self/etc/passwd", escape, ""},
		{"loop1", otherErr, ""},
		{"missing.txt", notExist, ""},
	}
	for name, d := range backends(t, ws) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			for _, tt := range tests {
				b, err := d.ReadFile(ctx, tt.p, 0)
				switch tt.want {
				case ok:
					if err != nil || string(b) != tt.data {
						t.Errorf("ReadFile(%q) = %q, %v; want %q", tt.p, b, err, tt.data)
					}
				case escape:
					if !errors.Is(err, sandbox.ErrPathEscape) {
						t.Errorf("ReadFile(%q) = %q, %v; want sandbox.ErrPathEscape", tt.p, b, err)
					}
				case notExist:
					if !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("ReadFile(%q) = %q, %v; want not exist", tt.p, b, err)
					}
				case otherErr:
					if err == nil {
						t.Errorf("ReadFile(%q) succeeded, want an error", tt.p)
					}
				}
			}
			// Writes through escaping links must fail and leave the sibling alone.
			for _, p := range []string{"link_sibling/new.txt", "a/chain/secret.txt", "dangling_out", "link_etc/agentctl-test", "a/b/deep_out"} {
				if err := d.WriteFile(ctx, p, []byte("pwned"), 0o644); !errors.Is(err, sandbox.ErrPathEscape) {
					t.Errorf("WriteFile(%q) = %v, want sandbox.ErrPathEscape", p, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "..", "sibling", "secret.txt")); string(b) != "secret" {
				t.Errorf("sibling secret changed to %q", b)
			}
			if _, err := os.Stat(filepath.Join(ws, "..", "sibling", "new.txt")); err == nil {
				t.Error("a file was created in the sibling workspace")
			}
			if err := d.Mkdir(ctx, "link_sibling/sub"); !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("Mkdir through escaping link = %v, want sandbox.ErrPathEscape", err)
			}
			if _, err := d.ReadDir(ctx, "link_etc"); !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("ReadDir(link_etc) = %v, want sandbox.ErrPathEscape", err)
			}
			// Stat and Remove act on the link itself, not its target.
			fi, err := d.Stat(ctx, "link_etc")
			if err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != "/etc" {
				t.Errorf("Stat(link_etc) = %+v, %v; want the symlink itself", fi, err)
			}
			if _, err := d.Stat(ctx, "link_sibling/secret.txt"); !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("Stat through escaping link = %v, want sandbox.ErrPathEscape", err)
			}
			if err := d.Remove(ctx, "link_sibling/secret.txt"); !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("Remove through escaping link = %v, want sandbox.ErrPathEscape", err)
			}
		})
	}
}

func TestDirFileOperations(t *testing.T) {
	ctx := context.Background()
	for _, use2 := range []bool{true, false} {
		d, err := OpenRoot(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if use2 && !d.openat2 {
			continue
		}
		d.openat2 = use2
		t.Run(fmt.Sprintf("openat2=%v", use2), func(t *testing.T) {
			if err := d.WriteFile(ctx, "x/y/z.txt", []byte("data"), 0o755); err != nil {
				t.Fatal(err)
			}
			fi, err := d.Stat(ctx, "x/y/z.txt")
			if err != nil || fi.Size != 4 || fi.Mode.Perm()&0o100 == 0 || fi.Path != "x/y/z.txt" {
				t.Fatalf("Stat = %+v, %v", fi, err)
			}
			if _, err := d.ReadFile(ctx, "x/y/z.txt", 3); err == nil {
				t.Error("ReadFile over the limit succeeded")
			}
			if b, err := d.ReadFile(ctx, "x/y/z.txt", 4); err != nil || string(b) != "data" {
				t.Errorf("ReadFile at the limit = %q, %v", b, err)
			}
			if _, err := d.ReadFile(ctx, "x/y", 0); err == nil {
				t.Error("ReadFile of a directory succeeded")
			}
			if err := d.Symlink(ctx, "y/z.txt", "x/link"); err != nil {
				t.Fatal(err)
			}
			if err := d.Symlink(ctx, "../../out", "x/bad"); !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("Symlink out = %v", err)
			}
			ents, err := d.ReadDir(ctx, "x")
			if err != nil || len(ents) != 2 || ents[0].Path != "x/link" || ents[0].Target != "y/z.txt" || ents[1].Path != "x/y" || !ents[1].Mode.IsDir() {
				t.Fatalf("ReadDir = %+v, %v", ents, err)
			}
			if err := d.Remove(ctx, "x/y"); err == nil {
				t.Error("Remove of a non-empty directory succeeded")
			}
			if err := d.Remove(ctx, "x/y/z.txt"); err != nil {
				t.Fatal(err)
			}
			if err := d.Remove(ctx, "x/y"); err != nil {
				t.Fatal(err)
			}
			if err := d.Mkdir(ctx, "m/n/o"); err != nil {
				t.Fatal(err)
			}
			if err := d.Mkdir(ctx, "m/n/o"); err != nil {
				t.Errorf("Mkdir of an existing dir = %v", err)
			}
			if err := d.Remove(ctx, "."); err == nil {
				t.Error("Remove of the root succeeded")
			}
		})
	}
}

// backends opens the fixture workspace once per resolver the machine has.
func backends(t *testing.T, ws string) map[string]*Dir {
	t.Helper()
	out := map[string]*Dir{}
	d, err := OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if d.openat2 {
		out["openat2"] = d
	} else {
		t.Log("openat2 unavailable on this kernel; testing the os.Root resolver only")
	}
	d2, err := OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Close() })
	d2.openat2 = false
	out["os.Root"] = d2
	return out
}
