//go:build unix

package archive

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// Trees and archives come from internal/testfiles; these helpers work on
// host-directory workspaces.

func newHostDir(t *testing.T) *hostfs.HostDir {
	t.Helper()
	h, err := hostfs.NewHostDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func readWS(t *testing.T, h *hostfs.HostDir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Path(), filepath.FromSlash(p)))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}
