package sandboxtest

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

func (s *suite) testFiles(t *testing.T) {
	sb, _ := s.create(t, sandbox.Spec{})
	t.Run("write-read", func(t *testing.T) { checkWriteRead(t, sb) })
	t.Run("modes", func(t *testing.T) { checkModes(t, sb) })
	t.Run("dirs", func(t *testing.T) { checkDirs(t, sb) })
	t.Run("symlinks-inside", func(t *testing.T) { checkInsideLinks(t, sb) })
	t.Run("symlinks-out-refused", func(t *testing.T) { checkOutLinks(t, sb) })
	t.Run("lexical-escapes-refused", func(t *testing.T) { checkLexicalEscapes(t, sb) })
	t.Run("links-kept", func(t *testing.T) { checkLinksKept(t, sb) })
	t.Run("hostile-archives-refused", func(t *testing.T) { checkHostileArchives(t, sb) })
	t.Run("special-files-refused", func(t *testing.T) { checkSpecialFiles(t, sb) })
	t.Run("sparse", func(t *testing.T) { checkSparse(t, sb) })
	t.Run("deep-tree", func(t *testing.T) { checkDeepTree(t, sb) })
}

func checkWriteRead(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	names := []string{"files/rw/plain.txt", "files/rw/with space.md", "files/rw/ünïcødé/файл.txt", `files/rw/quote's "double".txt`, "files/rw/-dash", "files/rw/.hidden"}
	for i, n := range names {
		data := []byte(strings.Repeat(n, i+1))
		if err := sb.WriteFile(c, n, data, 0o640); err != nil {
			t.Errorf("WriteFile(%q) (creating its parent directories): %v", n, err)
			continue
		}
		if got, err := sb.ReadFile(c, n, 0); err != nil || !bytes.Equal(got, data) {
			t.Errorf("ReadFile(%q) did not return what WriteFile wrote: %q, %s", n, got, describe(err))
		}
		fi, err := sb.Stat(c, n)
		if err != nil || fi.Path != n || fi.Size != int64(len(data)) || !fi.Mode.IsRegular() || fi.ModTime.IsZero() {
			t.Errorf("Stat(%q) does not describe the file written: %+v, %s", n, fi, describe(err))
		}
	}
	bin := make([]byte, 256<<10)
	for i := range bin {
		bin[i] = byte(i*7 + i>>8)
	}
	if err := sb.WriteFile(c, "files/rw/bin.dat", bin, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(c, "files/rw/bin.dat", 0); err != nil || !bytes.Equal(got, bin) {
		t.Errorf("256 KiB of binary content did not survive WriteFile and ReadFile: %d bytes back, %s", len(got), describe(err))
	}
	if got := sh(t, sb, "reading a file written by WriteFile from a command", "cat files/rw/plain.txt"); got != names[0] {
		t.Errorf("a command reads %q from a file WriteFile wrote as %q", got, names[0])
	}
	if err := sb.WriteFile(c, "files/rw/plain.txt", []byte("short"), 0o640); err != nil {
		t.Fatal(err)
	}
	if got, _ := sb.ReadFile(c, "files/rw/plain.txt", 0); string(got) != "short" {
		t.Errorf("WriteFile over a longer file left its old tail: %q", got)
	}
	if got, err := sb.ReadFile(c, "files/rw/plain.txt", 5); err != nil || string(got) != "short" {
		t.Errorf("ReadFile with a limit equal to the size refused the file: %q, %s", got, describe(err))
	}
	if _, err := sb.ReadFile(c, "files/rw/plain.txt", 4); err == nil {
		t.Error("ReadFile of a file larger than its limit succeeded")
	}
}

func checkModes(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	for _, m := range []fs.FileMode{0o600, 0o640, 0o644, 0o700, 0o755} {
		p := fmt.Sprintf("files/modes/m%o", m)
		if err := sb.WriteFile(c, p, []byte("#!/bin/sh\necho ran\n"), m); err != nil {
			t.Fatal(err)
		}
		fi, err := sb.Stat(c, p)
		if err != nil || fi.Mode != m {
			t.Errorf("a file written with mode %v has mode %v (%s)", m, fi.Mode, describe(err))
		}
		if got := strings.TrimSpace(sh(t, sb, "reading a mode from a command", "stat -c %a "+p)); got != fmt.Sprintf("%o", m) {
			t.Errorf("a command sees mode %s on a file written with mode %o", got, m)
		}
	}
	if got := sh(t, sb, "running a file written executable", "files/modes/m755"); got != "ran\n" {
		t.Errorf("a file written with mode 0755 does not run: %q", got)
	}
	in := tarOf(t, &tar.Header{Name: "suid", Typeflag: tar.TypeReg, Mode: 0o6755, Linkname: "x"},
		&tar.Header{Name: "sticky/", Typeflag: tar.TypeDir, Mode: 0o1777},
		&tar.Header{Name: "private/", Typeflag: tar.TypeDir, Mode: 0o700})
	if err := sb.CopyIn(c, "files/modes/in", in); err != nil {
		t.Fatalf("CopyIn of files with setuid, setgid and sticky bits: %v", err)
	}
	for p, want := range map[string]fs.FileMode{"suid": 0o755, "private": fs.ModeDir | 0o700} {
		if fi, err := sb.Stat(c, "files/modes/in/"+p); err != nil || fi.Mode&^fs.ModeSticky != want {
			t.Errorf("CopyIn of %s gave mode %v (%s), want %v: setuid and setgid must be dropped, permissions kept", p, fi.Mode, describe(err), want)
		}
	}
}

func checkDirs(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	for range 2 {
		if err := sb.Mkdir(c, "files/dirs/x/y/z"); err != nil {
			t.Fatalf("Mkdir of a directory and its parents (twice): %v", err)
		}
	}
	if fi, err := sb.Stat(c, "files/dirs/x/y/z"); err != nil || !fi.Mode.IsDir() {
		t.Errorf("Mkdir made no directory: %+v, %s", fi, describe(err))
	}
	sh(t, sb, "making entries of every kind", "cd files/dirs && echo a > b.txt && ln -s b.txt link && touch .hidden && mkfifo pipe")
	ents, err := sb.ReadDir(c, "files/dirs")
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	var got []string
	for _, e := range ents {
		kind := "file"
		switch {
		case e.Mode.IsDir():
			kind = "dir"
		case e.Mode&fs.ModeSymlink != 0:
			kind = "link to " + e.Target
		case e.Mode&fs.ModeNamedPipe != 0:
			kind = "fifo"
		}
		got = append(got, e.Path+" ("+kind+")")
	}
	want := []string{"files/dirs/.hidden (file)", "files/dirs/b.txt (file)", "files/dirs/link (link to b.txt)", "files/dirs/pipe (fifo)", "files/dirs/x (dir)"}
	if !slices.Equal(got, want) {
		t.Errorf("ReadDir did not list every entry, sorted, with its type:\n got %q\nwant %q", got, want)
	}
	if err := sb.Remove(c, "files/dirs/x"); err == nil {
		t.Error("Remove of a directory that is not empty succeeded")
	}
	for _, p := range []string{"files/dirs/b.txt", "files/dirs/x/y/z"} {
		if err := sb.Remove(c, p); err != nil {
			t.Errorf("Remove(%q): %v", p, err)
		}
		if _, err := sb.Stat(c, p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat after Remove(%q) = %s, want fs.ErrNotExist", p, describe(err))
		}
	}
	if _, err := sb.ReadFile(c, "files/dirs/no-such-file", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a missing file = %s, want fs.ErrNotExist", describe(err))
	}
}

func checkInsideLinks(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	sh(t, sb, "making links inside the workspace", "mkdir -p files/in/real && echo in > files/in/real/f && cd files/in && ln -s real alias && ln -s real/f flink && ln -s ../in/real/f up-and-back")
	for _, p := range []string{"files/in/alias/f", "files/in/flink", "files/in/up-and-back"} {
		if got, err := sb.ReadFile(c, p, 0); err != nil || string(got) != "in\n" {
			t.Errorf("ReadFile through a symlink that stays inside the workspace (%s) = %q, %s", p, got, describe(err))
		}
	}
	if err := sb.WriteFile(c, "files/in/flink", []byte("via link"), 0o644); err != nil {
		t.Errorf("WriteFile through a symlink that stays inside: %v", err)
	}
	if got := sh(t, sb, "reading a link's target", "cat files/in/real/f"); got != "via link" {
		t.Errorf("WriteFile through an inside link did not write its target: %q", got)
	}
	fi, err := sb.Stat(c, "files/in/flink")
	if err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != "real/f" {
		t.Errorf("Stat followed a final symlink or lost its target: %+v, %s", fi, describe(err))
	}
	if err := sb.Remove(c, "files/in/flink"); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(c, "files/in/real/f", 0); err != nil || string(got) != "via link" {
		t.Errorf("Remove of a symlink removed or changed its target: %q, %s", got, describe(err))
	}
}

// checkOutLinks: every file operation refuses to follow a symlink out of
// the workspace, whichever way the link leaves (absolute, climbing,
// through a link to the root, in a parent directory), and nothing beyond
// the workspace changes.
func checkOutLinks(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	o := makeOutside(t, sb)
	sh(t, sb, "making symlinks out of the workspace", fmt.Sprintf(
		"mkdir -p files/out/d && cd files/out && ln -s %[1]s abs && ln -s %[1]s/s abs-file && ln -s %[2]s climb && ln -s / rootlink && ln -s %[3]s d/deep && ln -s d inner",
		o.dir, up(o.dir), "../"+up(o.dir)))
	rel := strings.TrimPrefix(o.dir, "/")
	reads := []string{"abs/s", "abs-file", "climb/s", "rootlink/" + rel + "/s", "d/deep/s", "inner/deep/s"}
	for _, p := range reads {
		p = "files/out/" + p
		if got, err := sb.ReadFile(c, p, 0); !isEscape(err) {
			t.Errorf("symlink out of the workspace was followed by ReadFile(%q): read %q, %s; want ErrPathEscape", p, got, describe(err))
		}
		if err := sb.WriteFile(c, p, []byte("pwned"), 0o644); !isEscape(err) {
			t.Errorf("symlink out of the workspace was followed by WriteFile(%q): %s; want ErrPathEscape", p, describe(err))
		}
	}
	for _, p := range []string{"abs/new", "climb/new", "rootlink/" + rel + "/new", "inner/deep/new"} {
		p = "files/out/" + p
		if err := sb.WriteFile(c, p, []byte("pwned"), 0o644); !isEscape(err) {
			t.Errorf("symlink out of the workspace was followed by WriteFile(%q) creating a file: %s; want ErrPathEscape", p, describe(err))
		}
		if err := sb.Mkdir(c, p+"-dir"); !isEscape(err) {
			t.Errorf("symlink out of the workspace was followed by Mkdir(%q): %s; want ErrPathEscape", p+"-dir", describe(err))
		}
		if err := sb.CopyIn(c, p+"-tar", tarOf(t, &tar.Header{Name: "x", Typeflag: tar.TypeReg, Linkname: "pwned"})); !isEscape(err) {
			t.Errorf("symlink out of the workspace was followed by CopyIn into %q: %s; want ErrPathEscape", p+"-tar", describe(err))
		}
	}
	for _, p := range []string{"abs", "climb", "rootlink"} {
		p = "files/out/" + p
		if ents, err := sb.ReadDir(c, p); !isEscape(err) {
			t.Errorf("symlink out of the workspace was followed by ReadDir(%q): %d entries, %s; want ErrPathEscape", p, len(ents), describe(err))
		}
		if rc, err := sb.CopyOut(c, p); !isEscape(err) {
			if rc != nil {
				rc.Close()
			}
			t.Errorf("symlink out of the workspace was followed by CopyOut(%q): %s; want ErrPathEscape", p, describe(err))
		}
		if err := sb.Remove(c, p+"/s"); !isEscape(err) && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("symlink out of the workspace was followed by Remove(%q): %s; want ErrPathEscape", p+"/s", describe(err))
		}
		if fi, err := sb.Stat(c, p+"/s"); !isEscape(err) && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("symlink out of the workspace was followed by Stat(%q): %+v, %s; want ErrPathEscape", p+"/s", fi, describe(err))
		}
	}
	if fi, err := sb.Stat(c, "files/out/abs"); err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != o.dir {
		t.Errorf("Stat of a symlink out of the workspace must describe the link itself: %+v, %s", fi, describe(err))
	}
	if err := sb.Remove(c, "files/out/abs-file"); err != nil {
		t.Errorf("Remove of a symlink out of the workspace (the link itself): %v", err)
	}
	o.check(t, sb, "file operations through symlinks out of the workspace")
}

func checkLexicalEscapes(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	o := makeOutside(t, sb)
	for _, p := range []string{"..", "../agentctl-suite-escape", "files/../../agentctl-suite-escape", o.dir + "/s", o.dir + "/new", "a\x00b", `files\..\..\x`} {
		if _, err := sb.ReadFile(c, p, 0); err == nil {
			t.Errorf("ReadFile of a path out of the workspace (%q) was not refused", p)
		}
		if err := sb.WriteFile(c, p, []byte("pwned"), 0o644); err == nil {
			t.Errorf("WriteFile of a path out of the workspace (%q) was not refused", p)
		}
	}
	for _, p := range []string{"../x", o.dir + "/s"} {
		if _, err := sb.ReadFile(c, p, 0); !isEscape(err) {
			t.Errorf("ReadFile(%q) = %s, want ErrPathEscape", p, describe(err))
		}
	}
	o.check(t, sb, "file operations on paths out of the workspace")
}

// checkLinksKept: symlinks whose target leaves the workspace (a Python
// venv has them) come in through CopyIn as links with their target, and
// are still never followed.
func checkLinksKept(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	in := tarOf(t, &tar.Header{Name: "venv/bin/python", Typeflag: tar.TypeSymlink, Linkname: "/usr/bin/python3"},
		&tar.Header{Name: "venv/up", Typeflag: tar.TypeSymlink, Linkname: "../../../../etc"},
		&tar.Header{Name: "venv/rel", Typeflag: tar.TypeSymlink, Linkname: "bin/python"})
	if err := sb.CopyIn(c, "files/kept", in); err != nil {
		t.Fatalf("CopyIn of symlinks whose targets leave the workspace was refused (they must be kept as links): %v", err)
	}
	for p, want := range map[string]string{"venv/bin/python": "/usr/bin/python3", "venv/up": "../../../../etc", "venv/rel": "bin/python"} {
		if fi, err := sb.Stat(c, "files/kept/"+p); err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != want {
			t.Errorf("CopyIn did not keep %s as a symlink to %s: %+v, %s", p, want, fi, describe(err))
		}
	}
	if _, err := sb.ReadFile(c, "files/kept/venv/bin/python", 0); !isEscape(err) {
		t.Errorf("symlink out of the workspace (copied in) was followed by ReadFile: %s", describe(err))
	}
}

// checkHostileArchives: CopyIn refuses what a safe extractor refuses,
// and nothing reaches beyond the workspace.
func checkHostileArchives(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	o := makeOutside(t, sb)
	reg := func(name string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "pwned"}
	}
	for _, h := range []struct {
		name string
		tar  *bytes.Buffer
		want error
	}{
		{"an absolute member", tarOf(t, reg(o.dir+"/abs")), sandbox.ErrPathEscape},
		{"a member climbing out with ..", tarOf(t, reg("a/../../"+up(o.dir)+"/dotdot")), sandbox.ErrPathEscape},
		{"a member written through a symlink out", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: o.dir}, reg("l/through")), sandbox.ErrPathEscape},
		{"a directory over a symlink out", tarOf(t, &tar.Header{Name: "l2", Typeflag: tar.TypeSymlink, Linkname: up(o.dir)}, &tar.Header{Name: "l2/", Typeflag: tar.TypeDir, Mode: 0o755}, reg("l2/dir")), sandbox.ErrPathEscape},
		{"a hard link to a file outside", tarOf(t, &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: o.dir + "/s"}), hostfs.ErrUnsafeArchive},
		{"a character device", tarOf(t, &tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}), hostfs.ErrUnsafeArchive},
		{"a block device", tarOf(t, &tar.Header{Name: "blk", Typeflag: tar.TypeBlock, Devmajor: 7, Devminor: 0}), hostfs.ErrUnsafeArchive},
		{"a FIFO", tarOf(t, &tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}), hostfs.ErrUnsafeArchive},
	} {
		if err := sb.CopyIn(c, "files/hostile", h.tar); !errors.Is(err, h.want) {
			t.Errorf("CopyIn of %s = %s, want %v", h.name, describe(err), h.want)
		}
	}
	// A symlink out that a command left is replaced by a member of its
	// name, never written through; where the archive has a directory,
	// the link is replaced by one or the member refused.
	sh(t, sb, "leaving symlinks out of the workspace", "mkdir -p files/hostile2 && ln -s "+o.dir+" files/hostile2/d && ln -s "+o.dir+"/s files/hostile2/f")
	if err := sb.CopyIn(c, "files/hostile2", tarOf(t, reg("f"))); err != nil {
		t.Errorf("CopyIn of a file over a symlink a command left (the link must be replaced): %v", err)
	}
	if got, err := sb.ReadFile(c, "files/hostile2/f", 0); err != nil || string(got) != "pwned" {
		t.Errorf("CopyIn of a file over a symlink a command left did not replace the link: it reads %q (%s)", got, describe(err))
	}
	if err := sb.CopyIn(c, "files/hostile2", tarOf(t, reg("d/new"))); err != nil && !isEscape(err) {
		t.Errorf("CopyIn beneath a symlink a command left = %s, want the link replaced by a directory or ErrPathEscape", describe(err))
	}
	o.check(t, sb, "CopyIn of hostile archives")
}

// checkSpecialFiles: FIFOs and devices in the workspace (a command can
// make them) are refused by the file operations, never opened.
func checkSpecialFiles(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	sh(t, sb, "making a FIFO", "mkdir -p files/special && mkfifo files/special/fifo")
	specials := []string{"files/special/fifo"}
	res := run(t, sb, sandbox.ExecRequest{Shell: "mknod files/special/null c 1 3"})
	if res.ExitCode == 0 {
		specials = append(specials, "files/special/null")
	} else {
		t.Logf("this sandbox may not make device nodes (%s): devices are checked through CopyIn only", strings.TrimSpace(string(res.Stderr)))
	}
	for _, p := range specials {
		fi, err := sb.Stat(c, p)
		if err != nil || fi.Mode.IsRegular() || fi.Mode.IsDir() {
			t.Errorf("Stat of the special file %s = %v, %s; want its type", p, fi.Mode, describe(err))
		}
		if _, err := sb.ReadFile(c, p, 0); !errors.Is(err, sandbox.ErrNotRegular) {
			t.Errorf("ReadFile of the special file %s = %s, want ErrNotRegular (never opened)", p, describe(err))
		}
		if err := sb.WriteFile(c, p, []byte("x"), 0o644); !errors.Is(err, sandbox.ErrNotRegular) {
			t.Errorf("WriteFile of the special file %s = %s, want ErrNotRegular (never opened)", p, describe(err))
		}
	}
}

// checkSparse: a few KB of archive that expand to 64 MiB of holes come
// in with the right size and content, and an archive expanding to 2 TiB
// is refused before it fills the disk.
func checkSparse(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	const size = 64 << 20
	err := sb.CopyIn(c, "files/sparse", SparseTar(t, "big", size))
	if errors.Is(err, hostfs.ErrUnsafeArchive) && strings.Contains(err.Error(), "sparse") {
		// Extractors that would write the holes out as zeros refuse
		// sparse members (docs/sandbox.md, "Safe extraction").
		t.Logf("CopyIn refuses sparse members here: %v", err)
	} else {
		checkSparseFile(t, sb, err, size)
	}
	if err := sb.CopyIn(c, "files/sparse/huge", SparseTar(t, "huge", 2<<40)); !errors.Is(err, hostfs.ErrUnsafeArchive) {
		t.Errorf("CopyIn of a member expanding to 2 TiB = %s, want ErrUnsafeArchive", describe(err))
	}
}

// checkSparseFile checks the sparse member CopyIn took in (with err).
func checkSparseFile(t *testing.T, sb sandbox.Sandbox, err error, size int64) {
	c := ctx(t)
	if err != nil {
		t.Fatalf("CopyIn of a sparse member: %v", err)
	}
	fi, err := sb.Stat(c, "files/sparse/big")
	if err != nil || fi.Size != size {
		t.Errorf("a sparse member of 64 MiB came in as %d bytes (%s)", fi.Size, describe(err))
	}
	got := sh(t, sb, "reading a sparse file", "tail -c 1 files/sparse/big; head -c 65536 files/sparse/big | tr -d '\\000' | wc -c")
	if got != "x0\n" && got != "x      0\n" {
		t.Errorf("a sparse member's content is wrong (its last byte and the count of non-zero bytes in its first 64 KiB): %q", got)
	}
}

// checkDeepTree: a tree 100 directories deep and 300 files wide goes in
// and out whole.
func checkDeepTree(t *testing.T, sb sandbox.Sandbox) {
	c := ctx(t)
	var hdrs []*tar.Header
	deep := "d"
	for i := 1; i < 100; i++ {
		deep += fmt.Sprintf("/%02d", i)
	}
	hdrs = append(hdrs, &tar.Header{Name: deep + "/leaf.txt", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "bottom"})
	for i := range 300 {
		hdrs = append(hdrs, &tar.Header{Name: fmt.Sprintf("wide/f%03d", i), Typeflag: tar.TypeReg, Mode: 0o644, Linkname: fmt.Sprint(i)})
	}
	if err := sb.CopyIn(c, "files/tree", tarOf(t, hdrs...)); err != nil {
		t.Fatalf("CopyIn of a tree 100 directories deep and 300 files wide: %v", err)
	}
	if got, err := sb.ReadFile(c, "files/tree/"+deep+"/leaf.txt", 0); err != nil || string(got) != "bottom" {
		t.Errorf("the file 100 directories deep reads %q, %s", got, describe(err))
	}
	if ents, err := sb.ReadDir(c, "files/tree/wide"); err != nil || len(ents) != 300 {
		t.Errorf("ReadDir of a directory of 300 files listed %d (%s)", len(ents), describe(err))
	}
	rc, err := sb.CopyOut(c, "files/tree")
	if err != nil {
		t.Fatalf("CopyOut of the tree: %v", err)
	}
	defer rc.Close()
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading CopyOut's archive: %v", err)
		}
		if strings.HasPrefix(h.Name, "/") || strings.HasPrefix(h.Name, "../") || path.Clean(h.Name) != strings.TrimSuffix(h.Name, "/") && h.Name != "./" {
			t.Errorf("CopyOut's member %q is not relative to the directory", h.Name)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			files[strings.TrimPrefix(h.Name, "./")] = string(b)
		}
	}
	if len(files) != 301 || files[deep+"/leaf.txt"] != "bottom" || files["wide/f299"] != "299" {
		t.Errorf("CopyOut of the tree gave %d files (the deepest reads %q), want 301", len(files), files[deep+"/leaf.txt"])
	}
}
