//go:build unix

package hostfs

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// legacyTar builds a tar stream as pre-POSIX tar wrote it: regular files
// (and directories, as names ending in a slash) carry the type flag NUL
// (the deprecated tar.TypeRegA). Members are name, content pairs.
func legacyTar(t testing.TB, members ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var offs []int // where each member's header starts
	for i := 0; i < len(members); i += 2 {
		offs = append(offs, buf.Len())
		// tar.Writer refuses a regular file named with a trailing slash:
		// write "d_" and make it "d/" below.
		name := strings.TrimSuffix(members[i], "/")
		if name != members[i] {
			name += "_"
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(members[i+1])), Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(members[i+1])); err != nil {
			t.Fatal(err)
		}
		if err := tw.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for i, off := range offs {
		h := b[off : off+512]
		if name := members[2*i]; strings.HasSuffix(name, "/") {
			h[len(name)-1] = '/'
		}
		h[156] = 0
		copy(h[148:156], "        ")
		sum := 0
		for _, c := range h {
			sum += int(c)
		}
		// The checksum field: six octal digits, NUL, space.
		copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	}
	return b
}

// TestExtractLegacyRegularFiles: members of old archives typed NUL are
// regular files (directories when the name ends in a slash), for Extract
// and SanitizeTar alike.
func TestExtractLegacyRegularFiles(t *testing.T) {
	arch := legacyTar(t, "old.txt", "legacy\n", "d/", "", "d/f", "x")
	if arch[156] != 0 {
		t.Fatalf("type flag %q, want NUL", arch[156])
	}
	if hdr, err := tar.NewReader(bytes.NewReader(arch)).Next(); err != nil || hdr.Typeflag != tar.TypeReg {
		t.Fatalf("first member: %+v, %v", hdr, err)
	}
	d, err := OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := Extract(t.Context(), d, "", bytes.NewReader(arch), ExtractLimits{}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"old.txt": "legacy\n", "d/f": "x"} {
		if b, err := os.ReadFile(filepath.Join(d.Path(), p)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(d.Path(), "d")); err != nil || !fi.IsDir() {
		t.Errorf("d: %v, %v; want a directory", fi, err)
	}

	var out bytes.Buffer
	if err := SanitizeTar(t.Context(), "", bytes.NewReader(arch), &out, SanitizeOptions{}); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&out)
	var got []string
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		got = append(got, hdr.Name+":"+string(hdr.Typeflag))
	}
	if want := []string{"old.txt:0", "d/:5", "d/f:0"}; !slices.Equal(got, want) {
		t.Errorf("SanitizeTar members = %q, want %q", got, want)
	}
}
