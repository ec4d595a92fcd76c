//go:build unix

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCleanPath(t *testing.T) {
	tests := []struct {
		p    string
		want string // "" = refused
	}{
		{"a.txt", "a.txt"},
		{"./a.txt", "a.txt"},
		{"a/b/c", "a/b/c"},
		{"a//b/", "a/b"},
		{"a/./b", "a/b"},
		{"a/../b", "b"},
		{"", "."},
		{".", "."},
		{"./", "."},
		{"dir/..", "."},
		{"...", "..."},
		{"..a", "..a"},
		{"a..", "a.."},
		{"/workspace", "."},
		{"/workspace/", "."},
		{"/workspace/a/b", "a/b"},
		{"/workspace//a", "a"},
		{"/workspace/./a", "a"},
		{"/workspace/a/../b", "b"},
		{"/etc/../workspace/x", "x"},
		{"..", ""},
		{"../x", ""},
		{"a/../../x", ""},
		{"a/../../workspace/x", ""},
		{"/workspace/..", ""},
		{"/workspace/../workspace/x", ""},
		{"/workspace/a/../../etc", ""},
		{"/workspacex/a", ""},
		{"/work", ""},
		{"/etc/passwd", ""},
		{"/", ""},
		{"//workspacex", ""},
		{"a\x00b", ""},
		{"a\\b", ""},
		{"..\\..\\etc", ""},
	}
	for _, tt := range tests {
		got, err := CleanPath("/workspace", tt.p)
		if tt.want == "" {
			if err == nil {
				t.Errorf("CleanPath(%q) = %q, want refusal", tt.p, got)
			} else if !errors.Is(err, ErrPathEscape) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.p)) {
				t.Errorf("CleanPath(%q) error %v: want ErrPathEscape naming the path", tt.p, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", tt.p, got, err, tt.want)
		}
	}
	// With no root, absolute paths are refused outright.
	if _, err := CleanPath("", "/workspace/a"); !errors.Is(err, ErrPathEscape) {
		t.Errorf("CleanPath with empty root accepted an absolute path: %v", err)
	}
	// A root of "/" makes every absolute path a workspace path.
	for p, want := range map[string]string{"/etc/x": "etc/x", "/": ".", "/a/../b": "b"} {
		if got, err := CleanPath("/", p); err != nil || got != want {
			t.Errorf("CleanPath(\"/\", %q) = %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := CleanPath("/", "/.."); !errors.Is(err, ErrPathEscape) {
		t.Errorf("CleanPath(\"/\", \"/..\") = %v, want ErrPathEscape", err)
	}
}

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
		{"/file.txt", escape, ""}, // absolute: CleanPath without root refuses
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
					if !errors.Is(err, ErrPathEscape) {
						t.Errorf("ReadFile(%q) = %q, %v; want ErrPathEscape", tt.p, b, err)
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
				if err := d.WriteFile(ctx, p, []byte("pwned"), 0o644); !errors.Is(err, ErrPathEscape) {
					t.Errorf("WriteFile(%q) = %v, want ErrPathEscape", p, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "..", "sibling", "secret.txt")); string(b) != "secret" {
				t.Errorf("sibling secret changed to %q", b)
			}
			if _, err := os.Stat(filepath.Join(ws, "..", "sibling", "new.txt")); err == nil {
				t.Error("a file was created in the sibling workspace")
			}
			if err := d.Mkdir(ctx, "link_sibling/sub"); !errors.Is(err, ErrPathEscape) {
				t.Errorf("Mkdir through escaping link = %v, want ErrPathEscape", err)
			}
			if _, err := d.ReadDir(ctx, "link_etc"); !errors.Is(err, ErrPathEscape) {
				t.Errorf("ReadDir(link_etc) = %v, want ErrPathEscape", err)
			}
			// Stat and Remove act on the link itself, not its target.
			fi, err := d.Stat(ctx, "link_etc")
			if err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != "/etc" {
				t.Errorf("Stat(link_etc) = %+v, %v; want the symlink itself", fi, err)
			}
			if _, err := d.Stat(ctx, "link_sibling/secret.txt"); !errors.Is(err, ErrPathEscape) {
				t.Errorf("Stat through escaping link = %v, want ErrPathEscape", err)
			}
			if err := d.Remove(ctx, "link_sibling/secret.txt"); !errors.Is(err, ErrPathEscape) {
				t.Errorf("Remove through escaping link = %v, want ErrPathEscape", err)
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
			if err := d.Symlink(ctx, "../../out", "x/bad"); !errors.Is(err, ErrPathEscape) {
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

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a", "../a", "/workspace/a", "/workspace/../x", "a/./b/../..", "\x00", "a\\b", "//", "/workspace"} {
		f.Add("/workspace", s)
	}
	f.Add("", "a/b")
	f.Fuzz(func(t *testing.T, root, p string) {
		got, err := CleanPath(root, p)
		if err != nil {
			if !errors.Is(err, ErrPathEscape) {
				t.Fatalf("error does not wrap ErrPathEscape: %v", err)
			}
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || strings.Contains(got, "\x00") || strings.Contains(got, "\\") {
			t.Fatalf("CleanPath(%q, %q) = %q", root, p, got)
		}
		for _, e := range strings.Split(got, "/") {
			if e == ".." || e == "" || (e == "." && got != ".") {
				t.Fatalf("CleanPath(%q, %q) = %q: unclean element %q", root, p, got, e)
			}
		}
		// Idempotent: a clean relative result is accepted as is.
		if again, err := CleanPath(root, got); err != nil || again != got {
			t.Fatalf("CleanPath(%q) = %q, %v; want it unchanged", got, again, err)
		}
	})
}
