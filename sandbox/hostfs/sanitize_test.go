//go:build unix

package hostfs

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testfiles"

	"github.com/agentctl/agentctl/sandbox"
)

// sanitized runs SanitizeTar for extraction into base and returns the
// headers it wrote.
func sanitized(t *testing.T, base string, in []byte, opts SanitizeOptions) ([]*tar.Header, error) {
	t.Helper()
	var out bytes.Buffer
	if err := SanitizeTar(context.Background(), base, bytes.NewReader(in), &out, opts); err != nil {
		return nil, err
	}
	var hdrs []*tar.Header
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, nil
		}
		if err != nil {
			t.Fatalf("SanitizeTar wrote an unreadable archive: %v", err)
		}
		hdrs = append(hdrs, h)
	}
}

func TestSanitizeTarRewrites(t *testing.T) {
	in := testfiles.Tar(t,
		&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "a/b/c.txt", Typeflag: tar.TypeReg, Mode: 0o4755, Linkname: "data",
			PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "x"}},
		&tar.Header{Name: "a/link", Typeflag: tar.TypeSymlink, Linkname: "b/c.txt"},
		&tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o2775},
		&tar.Header{Name: "plain", Typeflag: tar.TypeReg, Mode: 0o600, Uid: 0, Linkname: "x"},
	)
	hdrs, err := sanitized(t, "", in, SanitizeOptions{UID: 1000, GID: 1001})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hdrs {
		got = append(got, h.Name)
		if h.Uid != 1000 || h.Gid != 1001 {
			t.Errorf("%s: owner %d:%d, want 1000:1001", h.Name, h.Uid, h.Gid)
		}
		// Extended attributes come back as SCHILY.xattr.* PAX records.
		if len(h.PAXRecords) != 0 {
			t.Errorf("%s: PAX records %v kept", h.Name, h.PAXRecords)
		}
		want := int64(0o644)
		switch {
		case h.Typeflag == tar.TypeDir, h.Name == "a/b/c.txt":
			want = 0o755
		case h.Typeflag == tar.TypeSymlink:
			want = 0o777
		}
		if h.Mode != want {
			t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, want)
		}
	}
	// Parents come first as explicit directories, once each; a directory
	// member of the archive is still sent where it is.
	if want := "a/,a/b/,a/b/c.txt,a/link,a/,plain"; strings.Join(got, ",") != want {
		t.Fatalf("members %v, want %s", got, want)
	}

	// KeepPermissions keeps rwx bits only; directories stay usable by
	// their owner.
	hdrs, err = sanitized(t, "", in, SanitizeOptions{KeepPermissions: true})
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]int64{}
	for _, h := range hdrs {
		modes[h.Name] = h.Mode
	}
	if want := map[string]int64{"a/": 0o775, "a/b/": 0o755, "a/b/c.txt": 0o755, "a/link": 0o777, "plain": 0o600}; !maps.Equal(modes, want) {
		t.Errorf("modes %v, want %v (octal: dirs 0o775/0o755, files 0o755/0o600, links 0o777)", modes, want)
	}

	// A file replacing a directory sent earlier is refused: a remote
	// extractor would delete the directory with everything in it.
	_, err = sanitized(t, "", testfiles.Tar(t, testfiles.Reg("d/x", "1"), testfiles.Reg("d", "2")), SanitizeOptions{})
	if !errors.Is(err, ErrUnsafeArchive) {
		t.Errorf("file over a directory of the archive: %v, want ErrUnsafeArchive", err)
	}
}

// sparseTar is a PAX sparse file: 10 bytes in the archive, 1,000,010
// when extracted. tar.Writer does not write GNU.sparse records, so they
// are patched in.
func sparseTar(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	err := tw.WriteHeader(&tar.Header{Name: "sparse", Typeflag: tar.TypeReg, Size: 10, Mode: 0o644, Format: tar.FormatPAX,
		PAXRecords: map[string]string{"XNU.sparse.numblocks": "1", "XNU.sparse.map": "1000000,10", "XNU.sparse.size": "1000010"}})
	if err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("0123456789"))
	tw.Close()
	return bytes.ReplaceAll(b.Bytes(), []byte("XNU.sparse."), []byte("GNU.sparse."))
}

// TestSparseFiles: SanitizeTar, whose extractors would write the holes
// as zeros, refuses sparse members; Extract writes the holes as holes,
// within its limits.
func TestSparseFiles(t *testing.T) {
	// Sanity: the reader does expand it.
	tr := tar.NewReader(bytes.NewReader(sparseTar(t)))
	if h, err := tr.Next(); err != nil || h.Size != 1000010 {
		t.Fatalf("test archive is not sparse: %v %v", h, err)
	}
	if _, err := sanitized(t, "", sparseTar(t), SanitizeOptions{}); !errors.Is(err, ErrUnsafeArchive) {
		t.Errorf("SanitizeTar: %v, want ErrUnsafeArchive", err)
	}
	dir := t.TempDir()
	d, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := Extract(context.Background(), d, ".", bytes.NewReader(sparseTar(t)), ExtractLimits{}); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sparse"))
	if err != nil || len(b) != 1000010 || string(b[1000000:]) != "0123456789" || strings.Trim(string(b[:1000000]), "\x00") != "" {
		t.Fatalf("extracted sparse file: %d bytes, %v", len(b), err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "sparse"), &st); err != nil || st.Blocks*512 >= 1000000 {
		t.Errorf("extracted sparse file takes %d bytes on disk: its hole was written", st.Blocks*512)
	}
	if err := Extract(context.Background(), d, "b", bytes.NewReader(sparseTar(t)), ExtractLimits{MaxSparseBytes: 1 << 10}); !errors.Is(err, ErrUnsafeArchive) {
		t.Errorf("Extract past MaxSparseBytes: %v, want ErrUnsafeArchive", err)
	}
	if err := Extract(context.Background(), d, "c", bytes.NewReader(sparseTar(t)), ExtractLimits{MaxBytes: 5}); !errors.Is(err, ErrUnsafeArchive) {
		t.Errorf("Extract of sparse data past MaxBytes: %v, want ErrUnsafeArchive", err)
	}
}

// FuzzSanitizeTar checks that whatever SanitizeTar lets through is safe
// for an extractor that follows symlinks: relative names without "..",
// only files, directories and symlinks (with a non-empty target, which may
// be absolute: it is never written through), nothing beneath a symlink
// and no directory in place of one, no special mode bits, parents before
// children.
func FuzzSanitizeTar(f *testing.F) {
	f.Add(testfiles.Tar(f, testfiles.Reg("a/b", "x")), "")
	f.Add(testfiles.Tar(f, testfiles.Sym("l", "../x")), "sub")
	f.Add(testfiles.Tar(f, testfiles.Reg("../x", "x")), "")
	f.Add(testfiles.Tar(f, &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "a"}), "")
	f.Add(testfiles.Tar(f, &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o7777}), "x/y")
	f.Add(testfiles.Tar(f, testfiles.Sym("a", "."), testfiles.Reg("a/b", "x")), "")
	f.Fuzz(func(t *testing.T, data []byte, base string) {
		if _, err := sandbox.CleanPath("", base); err != nil {
			return
		}
		var out bytes.Buffer
		done := make(chan error, 1)
		go func() {
			done <- SanitizeTar(context.Background(), base, bytes.NewReader(data), &out, SanitizeOptions{UID: 7, GID: 7, KeepPermissions: len(data)%2 == 0})
		}()
		select {
		case err := <-done:
			if err != nil {
				return
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("SanitizeTar hangs on %q", data)
		}
		dirs := map[string]bool{}
		links := map[string]bool{}
		tr := tar.NewReader(&out)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("SanitizeTar wrote an unreadable archive: %v", err)
			}
			name := strings.TrimSuffix(h.Name, "/")
			if strings.HasPrefix(name, "/") || name == "" {
				t.Fatalf("bad name %q", h.Name)
			}
			for _, c := range strings.Split(name, "/") {
				if c == ".." || c == "." || c == "" {
					t.Fatalf("bad component in %q", h.Name)
				}
			}
			if i := strings.LastIndex(name, "/"); i > 0 && !dirs[name[:i]] {
				t.Fatalf("%q sent before its parent", h.Name)
			}
			for p := name; strings.Contains(p, "/"); {
				p = p[:strings.LastIndex(p, "/")]
				if links[p] {
					t.Fatalf("%q lies beneath the symlink %q", h.Name, p)
				}
			}
			switch h.Typeflag {
			case tar.TypeDir:
				if links[name] {
					t.Fatalf("directory %q replaces a symlink of the same archive", name)
				}
				dirs[name] = true
			case tar.TypeReg:
				delete(links, name)
			case tar.TypeSymlink:
				if h.Linkname == "" || strings.ContainsRune(h.Linkname, 0) {
					t.Fatalf("bad link target %q -> %q passed", name, h.Linkname)
				}
				links[name] = true
			default:
				t.Fatalf("type %q passed", h.Typeflag)
			}
			if h.Mode&^0o777 != 0 || h.Uid != 7 || h.Gid != 7 {
				t.Fatalf("%q: mode %o owner %d:%d passed", h.Name, h.Mode, h.Uid, h.Gid)
			}
		}
	})
}
