package local_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentctl/agentctl/engine/sandbox"
	"github.com/agentctl/agentctl/providers/local"
)

func tarOf(t testing.TB, files map[string]string) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	return &buf
}

func hostileTar(t testing.TB, h *tar.Header, body string) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h.Size = int64(len(body))
	if err := tw.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	tw.Close()
	return &buf
}

func TestFilePathsRefused(t *testing.T) {
	sb, _ := newSandbox(t, local.Options{Isolation: local.IsolationNone}, sandbox.Spec{})
	ctx := context.Background()
	for _, p := range []string{"/etc/passwd", "../x", "a/../../x", "..", "/"} {
		if p == "/" {
			continue
		}
		if _, err := sb.ReadFile(ctx, p, 0); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("ReadFile(%q) = %v, want ErrPathEscape", p, err)
		}
		if err := sb.WriteFile(ctx, p, []byte("x"), 0o644); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("WriteFile(%q) = %v, want ErrPathEscape", p, err)
		}
	}
	// Inside links are fine.
	if err := sb.WriteFile(ctx, "real/file.txt", []byte("in"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("real", filepath.Join(sb.Dir(), "alias"))
	if b, err := sb.ReadFile(ctx, "alias/file.txt", 0); err != nil || string(b) != "in" {
		t.Fatalf("read through an inside link = %q, %v", b, err)
	}
	if _, err := sb.ReadFile(ctx, "real/file.txt", 1); err == nil {
		t.Fatal("limit not enforced")
	}
}

func TestCopyRoundTrip(t *testing.T) {
	src, _ := newSandbox(t, local.Options{Isolation: local.IsolationNone}, sandbox.Spec{})
	dst, _ := newSandbox(t, local.Options{Isolation: local.IsolationNone}, sandbox.Spec{})
	ctx := context.Background()
	if err := src.CopyIn(ctx, "in", tarOf(t, map[string]string{"a.txt": "A", "sub/b.txt": "B"})); err != nil {
		t.Fatal(err)
	}
	os.Symlink("a.txt", filepath.Join(src.Dir(), "in", "link"))
	rc, err := src.CopyOut(ctx, "in")
	if err != nil {
		t.Fatal(err)
	}
	err = dst.CopyIn(ctx, "copy", rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	infos, err := dst.ReadDir(ctx, "copy")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Path)
	}
	if want := []string{"copy/a.txt", "copy/link", "copy/sub"}; !slices.Equal(names, want) {
		t.Fatalf("copied entries = %v, want %v", names, want)
	}
	if b, err := dst.ReadFile(ctx, "copy/link", 0); err != nil || string(b) != "A" {
		t.Fatalf("link copied as %q, %v", b, err)
	}
	if fi, _ := dst.Stat(ctx, "copy/link"); fi.Mode&fs.ModeSymlink == 0 || fi.Target != "a.txt" {
		t.Fatalf("link stat = %+v", fi)
	}
}

func TestCopyInHostileArchives(t *testing.T) {
	sb, _ := newSandbox(t, local.Options{Isolation: local.IsolationNone}, sandbox.Spec{})
	ctx := context.Background()
	for name, h := range map[string]*tar.Header{
		"absolute":         {Name: "/tmp/agentctl-pwned", Typeflag: tar.TypeReg, Mode: 0o644},
		"dotdot":           {Name: "../pwned", Typeflag: tar.TypeReg, Mode: 0o644},
		"nested dotdot":    {Name: "a/../../pwned", Typeflag: tar.TypeReg, Mode: 0o644},
		"hardlink":         {Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"},
		"absolute symlink": {Name: "s", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		"escaping symlink": {Name: "d/s", Typeflag: tar.TypeSymlink, Linkname: "../../.."},
		"device":           {Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
		"fifo":             {Name: "fifo", Typeflag: tar.TypeFifo},
	} {
		if err := sb.CopyIn(ctx, ".", hostileTar(t, h, "")); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := os.Stat("/tmp/agentctl-pwned"); err == nil {
		os.Remove("/tmp/agentctl-pwned")
		t.Fatal("absolute member written on the host")
	}
	// Setuid bits are dropped.
	if err := sb.CopyIn(ctx, ".", hostileTar(t, &tar.Header{Name: "suid", Typeflag: tar.TypeReg, Mode: 0o4755}, "x")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(sb.Dir(), "suid")); fi.Mode()&fs.ModeSetuid != 0 {
		t.Fatal("setuid bit kept")
	}
}
