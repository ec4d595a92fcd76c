//go:build unix

package hostfs

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentctl/agentctl/internal/testfiles"
)

// TestExtractLegacyRegularFiles: members of old archives typed NUL are
// regular files (directories when the name ends in a slash), for Extract
// and SanitizeTar alike.
func TestExtractLegacyRegularFiles(t *testing.T) {
	arch := testfiles.LegacyTar(t, "old.txt", "legacy\n", "d/", "", "d/f", "x")
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
