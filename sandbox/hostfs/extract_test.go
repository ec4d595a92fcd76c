//go:build unix

package hostfs

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/internal/testfiles"

	"github.com/agentctl/agentctl/sandbox"
)

func TestExtractHostileArchives(t *testing.T) {
	tests := []struct {
		name string
		into string // extraction dir
		hdrs []*tar.Header
		lim  ExtractLimits
		want error // sandbox.ErrPathEscape or ErrUnsafeArchive
	}{
		{name: "absolute path", hdrs: []*tar.Header{testfiles.Reg("/etc/agentctl-pwned", "x")}, want: sandbox.ErrPathEscape},
		{name: "dotdot", hdrs: []*tar.Header{testfiles.Reg("../pwned", "x")}, want: sandbox.ErrPathEscape},
		{name: "dotdot deep", hdrs: []*tar.Header{testfiles.Reg("a/b/../../../pwned", "x")}, want: sandbox.ErrPathEscape},
		{name: "dotdot staying inside", hdrs: []*tar.Header{testfiles.Reg("a/../b", "x")}, want: sandbox.ErrPathEscape},
		{name: "backslash", hdrs: []*tar.Header{testfiles.Reg(`..\..\pwned`, "x")}, want: sandbox.ErrPathEscape},
		{name: "hardlink", hdrs: []*tar.Header{testfiles.Reg("f1", "x"), {Typeflag: tar.TypeLink, Name: "f2", Linkname: "f1"}}, want: ErrUnsafeArchive},
		{name: "hardlink to host file", hdrs: []*tar.Header{{Typeflag: tar.TypeLink, Name: "shadow", Linkname: "/etc/shadow"}}, want: ErrUnsafeArchive},
		{name: "char device", hdrs: []*tar.Header{{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}}, want: ErrUnsafeArchive},
		{name: "block device", hdrs: []*tar.Header{{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}}, want: ErrUnsafeArchive},
		{name: "fifo", hdrs: []*tar.Header{{Typeflag: tar.TypeFifo, Name: "fifo"}}, want: ErrUnsafeArchive},
		{name: "symlink to /etc then write through it", hdrs: []*tar.Header{testfiles.Sym("etc", "/etc"), testfiles.Reg("etc/agentctl-pwned", "x")}, want: sandbox.ErrPathEscape},
		{name: "symlink to /etc then mkdir through it", hdrs: []*tar.Header{testfiles.Sym("etc", "/etc"), {Typeflag: tar.TypeDir, Name: "etc/agentctl-pwned/"}}, want: sandbox.ErrPathEscape},
		{name: "symlink to /etc then a directory in its place", hdrs: []*tar.Header{testfiles.Sym("etc", "/etc"), {Typeflag: tar.TypeDir, Name: "etc/"}, testfiles.Reg("etc/agentctl-pwned", "x")}, want: sandbox.ErrPathEscape},
		{name: "symlink to / then write deep through it", hdrs: []*tar.Header{testfiles.Sym("root", "/"), testfiles.Reg("root/etc/agentctl-pwned", "x")}, want: sandbox.ErrPathEscape},
		{name: "symlink up from subdir then write through it", hdrs: []*tar.Header{testfiles.Sym("a/b/up", "../../../sibling"), testfiles.Reg("a/b/up/secret.txt", "pwned")}, want: sandbox.ErrPathEscape},
		{name: "symlink then write through it", hdrs: []*tar.Header{testfiles.Sym("s", "../sibling"), testfiles.Reg("s/secret.txt", "pwned")}, want: sandbox.ErrPathEscape},
		{name: "symlink dotdot chain", hdrs: []*tar.Header{testfiles.Sym("c/d", "../.."), testfiles.Reg("c/d/x", "pwned")}, want: sandbox.ErrPathEscape},
		{name: "symlink to dot then dotdot under it", hdrs: []*tar.Header{testfiles.Sym("cur", "."), testfiles.Sym("cur/up", "..")}, want: sandbox.ErrPathEscape},
		{name: "inside symlink then member under it", hdrs: []*tar.Header{testfiles.Sym("alias", "a"), testfiles.Reg("alias/x", "z")}, want: sandbox.ErrPathEscape},
		{name: "copy-in dir is a planted symlink", into: "planted", hdrs: []*tar.Header{testfiles.Reg("x", "pwned")}, want: sandbox.ErrPathEscape},
		{name: "copy-in dir is a planted absolute symlink", into: "link_sibling_abs", hdrs: []*tar.Header{testfiles.Reg("secret.txt", "pwned")}, want: sandbox.ErrPathEscape},
		{name: "write through planted absolute workspace symlink", hdrs: []*tar.Header{testfiles.Reg("link_etc/agentctl-pwned", "x")}, want: sandbox.ErrPathEscape},
		{name: "write through planted workspace symlink", hdrs: []*tar.Header{testfiles.Reg("planted/secret.txt", "pwned")}, want: sandbox.ErrPathEscape},
		{name: "mkdir through planted workspace symlink", hdrs: []*tar.Header{{Typeflag: tar.TypeDir, Name: "planted/newdir/"}}, want: sandbox.ErrPathEscape},
		{name: "too many members", hdrs: []*tar.Header{testfiles.Reg("f1", "1"), testfiles.Reg("f2", "2"), testfiles.Reg("f3", "3")}, lim: ExtractLimits{MaxMembers: 2}, want: ErrUnsafeArchive},
		{name: "too many bytes", hdrs: []*tar.Header{testfiles.Reg("f1", "12345"), testfiles.Reg("f2", "67890")}, lim: ExtractLimits{MaxBytes: 8}, want: ErrUnsafeArchive},
		{name: "unknown type", hdrs: []*tar.Header{{Typeflag: 'Z', Name: "z"}}, want: ErrUnsafeArchive},
		{name: "dotdot dir", hdrs: []*tar.Header{{Typeflag: tar.TypeDir, Name: ".."}}, want: sandbox.ErrPathEscape},
		{name: "empty symlink", hdrs: []*tar.Header{testfiles.Sym("l", "")}, want: ErrUnsafeArchive},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent, ws := fixture(t)
			if err := os.Symlink("../sibling", filepath.Join(ws, "planted")); err != nil {
				t.Fatal(err)
			}
			d, err := OpenRoot(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			archive := testfiles.Tar(t, tt.hdrs...)
			err = Extract(ctx, d, tt.into, bytes.NewReader(archive), tt.lim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Extract = %v, want %v", err, tt.want)
			}
			if b, _ := os.ReadFile(filepath.Join(parent, "sibling", "secret.txt")); string(b) != "secret" {
				t.Errorf("sibling secret changed: %q", b)
			}
			ents, _ := os.ReadDir(filepath.Join(parent, "sibling"))
			if len(ents) != 1 {
				t.Errorf("sibling workspace gained entries: %v", ents)
			}
			ents, _ = os.ReadDir(parent)
			if len(ents) != 2 {
				t.Errorf("workspace parent gained entries: %v", ents)
			}
			// The stream filter refuses everything that does not depend on
			// what is already in the workspace.
			if !strings.Contains(tt.name, "planted") {
				err := SanitizeTar(ctx, tt.into, bytes.NewReader(archive), io.Discard, SanitizeOptions{Limits: tt.lim})
				if !errors.Is(err, tt.want) {
					t.Errorf("SanitizeTar = %v, want %v", err, tt.want)
				}
			}
			if _, err := os.Lstat("/etc/agentctl-pwned"); err == nil {
				t.Error("/etc/agentctl-pwned exists")
			}
		})
	}
}

func TestExtractSanitizesAndReplaces(t *testing.T) {
	ctx := context.Background()
	parent, ws := fixture(t)
	d, err := OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// A symlink planted in the workspace is replaced, not followed.
	if err := os.Symlink("../sibling/secret.txt", filepath.Join(ws, "victim")); err != nil {
		t.Fatal(err)
	}
	setuid := testfiles.Reg("bin/tool", "#!/bin/sh\n")
	setuid.Mode = 0o4755 | 0o2000 | 0o1000
	worldw := testfiles.Reg("data/open.txt", "x")
	worldw.Mode = 0o666
	ro := testfiles.Reg("data/ro.txt", "y")
	ro.Mode = 0o400
	dir := &tar.Header{Typeflag: tar.TypeDir, Name: "./data/", Mode: 0o7777}
	archive := testfiles.Tar(t, dir, setuid, worldw, ro, testfiles.Reg("victim", "replaced"), testfiles.Sym("data/link", "../bin/tool"),
		&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "x"}},
		&tar.Header{Typeflag: tar.TypeDir, Name: "./"}, testfiles.Reg("dup.txt", "one"), testfiles.Reg("dup.txt", "two"))
	if err := Extract(ctx, d, "", bytes.NewReader(archive), ExtractLimits{}); err != nil {
		t.Fatal(err)
	}
	checkMode := func(p string, want fs.FileMode) {
		t.Helper()
		st, err := os.Lstat(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s mode = %v, want %v", p, st.Mode(), want)
		}
	}
	checkMode("bin/tool", 0o755)
	checkMode("data/open.txt", 0o644)
	checkMode("data/ro.txt", 0o644)
	checkMode("data", fs.ModeDir|0o755)
	checkMode("victim", 0o644)
	if b, _ := os.ReadFile(filepath.Join(parent, "sibling", "secret.txt")); string(b) != "secret" {
		t.Errorf("write went through the planted symlink: sibling now %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "dup.txt")); string(b) != "two" {
		t.Errorf("dup.txt = %q, want the last member", b)
	}
	st, _ := os.Stat(filepath.Join(ws, "bin/tool"))
	if !st.ModTime().Equal(time.Unix(1700000000, 0)) {
		t.Errorf("mtime = %v", st.ModTime())
	}
	// A member may not replace a non-empty directory.
	err = Extract(ctx, d, "", bytes.NewReader(testfiles.Tar(t, testfiles.Reg("data", "x"))), ExtractLimits{})
	if err == nil {
		t.Error("a file replaced a non-empty directory")
	}
	// A truncated stream is an error.
	full := testfiles.Tar(t, testfiles.Reg("big.txt", strings.Repeat("z", 5000)))
	if err := Extract(ctx, d, "", bytes.NewReader(full[:1200]), ExtractLimits{}); err == nil {
		t.Error("truncated archive accepted")
	}
}

// A workspace's CopyIn keeps the members' permission bits, as every
// provider's does, so a restored 0600 file is 0600 again; set-id and
// sticky bits are still dropped and directories keep owner rwx. The
// modification times of directories and symlinks are kept too, so that a
// restored workspace archives as it was archived.
func TestCopyInKeepsPermissions(t *testing.T) {
	_, ws := fixture(t)
	d, err := OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	private := testfiles.Reg("data/private.txt", "p")
	private.Mode = 0o600
	setuid := testfiles.Reg("bin/tool", "#!/bin/sh\n")
	setuid.Mode = 0o4750
	old := time.Unix(1600000000, 0)
	archive := testfiles.Tar(t, &tar.Header{Typeflag: tar.TypeDir, Name: "data/", Mode: 0o750, ModTime: old}, private,
		&tar.Header{Typeflag: tar.TypeDir, Name: "locked/", Mode: 0o500}, setuid,
		&tar.Header{Typeflag: tar.TypeSymlink, Name: "data/link", Linkname: "private.txt", ModTime: old})
	if err := d.CopyIn(context.Background(), "", bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{"data": fs.ModeDir | 0o750, "data/private.txt": 0o600, "locked": fs.ModeDir | 0o700, "bin/tool": 0o750} {
		if st, err := os.Lstat(filepath.Join(ws, p)); err != nil || st.Mode() != want {
			t.Errorf("%s after CopyIn: %v, %v; want %v", p, st.Mode(), err, want)
		}
	}
	for _, p := range []string{"data", "data/link"} {
		if st, err := os.Lstat(filepath.Join(ws, p)); err != nil || !st.ModTime().Equal(old) {
			t.Errorf("%s after CopyIn was modified at %v (%v), want the archive's %v", p, st.ModTime(), err, old)
		}
	}
}

// TestExtractKeepsForeignSymlinks: symlinks whose target is absolute or
// climbs out of the workspace (a Python venv has both) are extracted as
// links with their target unchanged, never followed: nothing outside the
// workspace is touched, and a member replacing such a link replaces the
// link itself. SanitizeTar passes them on unchanged.
func TestExtractKeepsForeignSymlinks(t *testing.T) {
	ctx := context.Background()
	links := map[string]string{
		"venv/bin/python": "/usr/bin/python3",
		"venv/lib64":      "lib",
		"abslink":         "/etc/passwd",
		"etc":             "/etc",
		"root":            "/",
		"up":              "../sibling",
		"a/b/up":          "../../../sibling/secret.txt",
		"dangling":        "/nonexistent/agentctl-target",
	}
	for _, into := range []string{"", "sub"} {
		t.Run("into="+into, func(t *testing.T) {
			parent, ws := fixture(t)
			abs := filepath.Join(parent, "sibling", "secret.txt")
			if err := os.MkdirAll(filepath.Join(ws, into), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(abs, filepath.Join(ws, into, "victim_abs")); err != nil {
				t.Fatal(err)
			}
			d, err := OpenRoot(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			var hdrs []*tar.Header
			for name, target := range links {
				hdrs = append(hdrs, testfiles.Sym(name, target))
			}
			hdrs = append(hdrs, testfiles.Reg("venv/lib/site.py", "x"), testfiles.Reg("victim_abs", "replaced"))
			archive := testfiles.Tar(t, hdrs...)
			if err := Extract(ctx, d, into, bytes.NewReader(archive), ExtractLimits{}); err != nil {
				t.Fatal(err)
			}
			for name, target := range links {
				got, err := os.Readlink(filepath.Join(ws, into, name))
				if err != nil || got != target {
					t.Errorf("%s: link to %q, %v; want a link to %q", name, got, err, target)
				}
			}
			if b, err := os.ReadFile(abs); err != nil || string(b) != "secret" {
				t.Errorf("file outside the workspace changed: %q, %v", b, err)
			}
			if b, err := os.ReadFile(filepath.Join(ws, into, "victim_abs")); err != nil || string(b) != "replaced" {
				t.Errorf("victim_abs = %q, %v; want the member's content in place of the link", b, err)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 2 {
				t.Errorf("workspace parent gained entries: %v", ents)
			}
			// The workspace's own file tools still refuse to follow them.
			if _, err := d.ReadFile(ctx, relJoin(into, "abslink"), 0); !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("ReadFile through the restored absolute link = %v, want sandbox.ErrPathEscape", err)
			}
			var out bytes.Buffer
			if err := SanitizeTar(ctx, into, bytes.NewReader(archive), &out, SanitizeOptions{}); err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(&out)
			seen := 0
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if h.Typeflag == tar.TypeSymlink {
					if links[h.Name] != h.Linkname {
						t.Errorf("SanitizeTar: %s -> %q, want %q", h.Name, h.Linkname, links[h.Name])
					}
					seen++
				}
			}
			if seen != len(links) {
				t.Errorf("SanitizeTar passed %d links, want %d", seen, len(links))
			}
		})
	}
}

func TestArchiveExtractRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	files := map[string]string{"a.txt": "A", "d/e/f.bin": strings.Repeat("\x00\x01", 70000), "d/x.sh": "echo", "empty": ""}
	for p, c := range files {
		full := filepath.Join(src, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(c), mode); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(src, "node_modules/pkg"), 0o755)
	os.WriteFile(filepath.Join(src, "node_modules/pkg/i.js"), []byte("x"), 0o644)
	os.Symlink("d/x.sh", filepath.Join(src, "run"))
	sd, _ := OpenRoot(src)
	defer sd.Close()
	var buf bytes.Buffer
	m, _ := sandbox.CompileExclude([]string{"node_modules"})
	if err := Archive(ctx, sd, ".", &buf, ArchiveOptions{Exclude: m.Match}); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	dd, _ := OpenRoot(dst)
	defer dd.Close()
	if err := Extract(ctx, dd, "copy", bytes.NewReader(buf.Bytes()), ExtractLimits{}); err != nil {
		t.Fatal(err)
	}
	for p, c := range files {
		b, err := os.ReadFile(filepath.Join(dst, "copy", filepath.FromSlash(p)))
		if err != nil || string(b) != c {
			t.Errorf("%s: %d bytes, %v", p, len(b), err)
		}
	}
	if st, _ := os.Stat(filepath.Join(dst, "copy/d/x.sh")); st.Mode().Perm() != 0o755 {
		t.Errorf("exec bit lost: %v", st.Mode())
	}
	if tgt, err := os.Readlink(filepath.Join(dst, "copy/run")); err != nil || tgt != "d/x.sh" {
		t.Errorf("symlink = %q, %v", tgt, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "copy/node_modules")); err == nil {
		t.Error("excluded directory was archived")
	}
	// Strict archiving refuses the symlink.
	if err := Archive(ctx, sd, ".", &bytes.Buffer{}, ArchiveOptions{Strict: true}); !errors.Is(err, ErrSpecialFile) {
		t.Errorf("strict Archive with a symlink = %v", err)
	}
	// SanitizeTar passes a clean archive and refuses a hostile one.
	var out bytes.Buffer
	if err := SanitizeTar(ctx, "", bytes.NewReader(buf.Bytes()), &out, SanitizeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := SanitizeTar(ctx, "", bytes.NewReader(testfiles.Tar(t, testfiles.Sym("x", "/etc"), testfiles.Reg("x/passwd", "pwned"))), &out, SanitizeOptions{}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("SanitizeTar hostile = %v", err)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(testfiles.Tar(f, testfiles.Reg("a/b.txt", "hello"), testfiles.Sym("a/l", "b.txt"), &tar.Header{Typeflag: tar.TypeDir, Name: "d/"}))
	f.Add(testfiles.Tar(f, testfiles.Sym("s", "../x"), testfiles.Reg("s/y", "z")))
	f.Add(testfiles.Tar(f, testfiles.Reg("../../x", "z")))
	f.Add(testfiles.Tar(f, &tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "/etc/passwd"}))
	f.Add(testfiles.Tar(f, testfiles.Sym("a", "."), testfiles.Sym("a/b", ".."), testfiles.Reg("a/b/c", "z")))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		ws := filepath.Join(parent, "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		d, err := OpenRoot(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		_ = Extract(context.Background(), d, "", bytes.NewReader(data), ExtractLimits{MaxBytes: 1 << 20, MaxMembers: 200})
		ents, _ := os.ReadDir(parent)
		if len(ents) != 1 {
			t.Fatalf("extraction created entries beside the workspace: %v", ents)
		}
		filepath.WalkDir(ws, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			info, err := de.Info()
			if err != nil {
				return nil
			}
			m := info.Mode()
			switch {
			case m.IsDir():
			case m.IsRegular():
				if p != ws && m.Perm() != 0o644 && m.Perm() != 0o755 {
					t.Fatalf("%s has mode %v", p, m)
				}
			case m&fs.ModeSymlink != 0:
				// Any target is kept; WalkDir does not follow links, and
				// the check beside the workspace above shows nothing was
				// written through one.
			default:
				t.Fatalf("%s has type %v", p, m.Type())
			}
			return nil
		})
	})
}

// TestExtractFromContentWriter: from a stream that writes members'
// content from its own buffers (ContentWriter, here a digest's
// TeeReader), Extract makes the tree it makes from a plain reader, passes
// over the content of a member it skips, and reads the whole stream (the
// digest is the archive's); a truncated stream fails on both.
func TestExtractFromContentWriter(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("0123456789", 30000) // more than a buffer
	tarball := testfiles.Tar(t,
		testfiles.Reg("a.txt", "A"),
		&tar.Header{Typeflag: tar.TypeReg, Name: ".", Linkname: "content of a member that creates nothing", ModTime: time.Unix(1700000000, 0)},
		testfiles.Reg("empty", ""),
		testfiles.Reg("d/big.bin", big),
		testfiles.Sym("link", "a.txt"),
		testfiles.Reg("d/e/one", "1"),
		testfiles.Reg("last.txt", strings.Repeat("x", 511)),
	)
	plain := t.TempDir()
	if err := Extract(ctx, openRoot(t, plain), "out", bytes.NewReader(tarball), ExtractLimits{}); err != nil {
		t.Fatal(err)
	}
	direct := t.TempDir()
	h := hashpipe.New(sha256.New())
	tr := h.TeeReader(bytes.NewReader(tarball))
	if _, ok := any(tr).(ContentWriter); !ok {
		t.Fatal("a TeeReader is not a ContentWriter")
	}
	if err := Extract(ctx, openRoot(t, direct), "out", tr, ExtractLimits{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(testfiles.DescribeTree(t, plain), testfiles.DescribeTree(t, direct)); diff != "" {
		t.Errorf("the tree from a ContentWriter differs (-plain +direct):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(direct, "out/d/big.bin")); string(b) != big {
		t.Errorf("d/big.bin: %d bytes", len(b))
	}
	io.Copy(io.Discard, tr) // the end-of-archive blocks
	want := sha256.Sum256(tarball)
	if got := h.Sum(); !bytes.Equal(got, want[:]) {
		t.Error("the stream's digest is not the archive's")
	}

	cut := tarball[:bytes.Index(tarball, []byte(big))+len(big)/2]
	for name, r := range map[string]io.Reader{"plain": bytes.NewReader(cut), "direct": hashpipe.New(sha256.New()).TeeReader(bytes.NewReader(cut))} {
		err := Extract(ctx, openRoot(t, t.TempDir()), "out", r, ExtractLimits{})
		if err == nil || !strings.Contains(err.Error(), "archive truncated") {
			t.Errorf("%s: a truncated archive: %v", name, err)
		}
	}
}
