package local_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
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

// sparseTar is a PAX (GNU 1.0) sparse archive of a few KB whose single
// member expands to size bytes of zeros; Go's tar writer cannot write
// sparse files, so the extended header is made by hand.
func sparseTar(t testing.TB, size int64) io.Reader {
	t.Helper()
	rec := func(k, v string) string {
		s := " " + k + "=" + v + "\n"
		for d := 1; ; d++ {
			if n := len(s) + d; len(strconv.Itoa(n)) == d {
				return strconv.Itoa(n) + s
			}
		}
	}
	recs := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") + rec("GNU.sparse.name", "big") + rec("GNU.sparse.realsize", strconv.FormatInt(size, 10))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "PaxHeaders/big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(recs)), Format: tar.FormatUSTAR})
	tw.Write([]byte(recs))
	tw.Flush()
	b := buf.Bytes()
	b[156] = tar.TypeXHeader
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	sparseMap := fmt.Sprintf("1\n%d\n1\n", size-1)
	body := sparseMap + strings.Repeat("\x00", 512-len(sparseMap)) + "x"
	tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatUSTAR})
	tw.Write([]byte(body))
	tw.Close()
	// The archive is what it claims to be: Go's reader expands it.
	h, err := tar.NewReader(bytes.NewReader(buf.Bytes())).Next()
	if err != nil || h.Size != size {
		t.Fatalf("sparse archive reads as %+v, %v", h, err)
	}
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
	// Links a command may make whose target leaves the workspace (a
	// Python venv has both kinds) are copied as links, never followed.
	os.Symlink("/usr/bin/python3", filepath.Join(src.Dir(), "in", "python"))
	os.Symlink("../../../outside", filepath.Join(src.Dir(), "in", "sub", "up"))
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
	if want := []string{"copy/a.txt", "copy/link", "copy/python", "copy/sub"}; !slices.Equal(names, want) {
		t.Fatalf("copied entries = %v, want %v", names, want)
	}
	if b, err := dst.ReadFile(ctx, "copy/link", 0); err != nil || string(b) != "A" {
		t.Fatalf("link copied as %q, %v", b, err)
	}
	if fi, _ := dst.Stat(ctx, "copy/link"); fi.Mode&fs.ModeSymlink == 0 || fi.Target != "a.txt" {
		t.Fatalf("link stat = %+v", fi)
	}
	for p, want := range map[string]string{"copy/python": "/usr/bin/python3", "copy/sub/up": "../../../outside"} {
		if fi, err := dst.Stat(ctx, p); err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != want {
			t.Errorf("%s: %+v, %v; want a link to %s", p, fi, err, want)
		}
	}
	if _, err := dst.ReadFile(ctx, "copy/python", 0); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("reading through the copied absolute link = %v, want ErrPathEscape", err)
	}
}

func TestCopyInHostileArchives(t *testing.T) {
	sb, _ := newSandbox(t, local.Options{Isolation: local.IsolationNone}, sandbox.Spec{})
	ctx := context.Background()
	for name, h := range map[string]*tar.Header{
		"absolute":      {Name: "/tmp/agentctl-pwned", Typeflag: tar.TypeReg, Mode: 0o644},
		"dotdot":        {Name: "../pwned", Typeflag: tar.TypeReg, Mode: 0o644},
		"nested dotdot": {Name: "a/../../pwned", Typeflag: tar.TypeReg, Mode: 0o644},
		"hardlink":      {Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"},
		"device":        {Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
		"fifo":          {Name: "fifo", Typeflag: tar.TypeFifo},
	} {
		if err := sb.CopyIn(ctx, ".", hostileTar(t, h, "")); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Links whose target leaves the workspace are kept (see
	// TestCopyRoundTrip), but nothing is ever written through one.
	var through bytes.Buffer
	tw := tar.NewWriter(&through)
	tw.WriteHeader(&tar.Header{Name: "s", Typeflag: tar.TypeSymlink, Linkname: "/tmp"})
	tw.WriteHeader(&tar.Header{Name: "s/agentctl-pwned", Typeflag: tar.TypeReg, Mode: 0o644})
	tw.Close()
	if err := sb.CopyIn(ctx, ".", &through); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("write through an absolute symlink: %v, want ErrPathEscape", err)
	}
	// A few KB that expand to 256 MB of zeros are extracted with their
	// hole, taking no room; 2 TiB of them are past the limit.
	if err := sb.CopyIn(ctx, ".", sparseTar(t, 256<<20)); err != nil {
		t.Errorf("sparse member: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(sb.Dir(), "big"), &st); err != nil || st.Size != 256<<20 || st.Blocks*512 > 1<<20 {
		t.Errorf("sparse member extracted as %d bytes taking %d on disk (%v), want a sparse file of 256 MiB", st.Size, st.Blocks*512, err)
	}
	if err := sb.CopyIn(ctx, "huge", sparseTar(t, 2<<40)); !errors.Is(err, hostfs.ErrUnsafeArchive) {
		t.Errorf("2 TiB sparse member: %v, want ErrUnsafeArchive", err)
	}
	if _, err := os.Lstat("/tmp/agentctl-pwned"); err == nil {
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
