//go:build unix

package archive

import (
	"archive/tar"
	"bytes"
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
