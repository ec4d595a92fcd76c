//go:build unix

package archive

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// The helpers below are the ones the hostfs and manifest tests use to
// build workspaces and archives.

func newHostDir(t *testing.T) *hostfs.HostDir {
	t.Helper()
	h, err := hostfs.NewHostDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(c), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// tarOf builds a tar stream from headers; a regular file's content is
// its Linkname field when Size is set (test shorthand).
func tarOf(t testing.TB, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		if h.Mode == 0 && h.Typeflag != tar.TypeXGlobalHeader {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func reg(name, body string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Linkname: body, ModTime: time.Unix(1700000000, 0)}
}

func readWS(t *testing.T, h *hostfs.HostDir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Path(), filepath.FromSlash(p)))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// legacyTar (as in the hostfs tests) builds a tar stream as pre-POSIX tar wrote it: regular files
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
