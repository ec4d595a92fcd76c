package tools

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestApplyPatchConformance runs every scenario of the apply_patch
// conformance suite through the apply_patch tool on a host-directory
// workspace and judges it as the suite's README says: the directory left
// behind must equal expected/ (same directories, same files, same bytes).
func TestApplyPatchConformance(t *testing.T) {
	// The suite is vendored with its license and SHA256SUMS under
	// testdata/apply_patch (see its README.md for where it comes from).
	scenarios := filepath.Join("testdata", "apply_patch", "scenarios")
	ents, err := os.ReadDir(scenarios)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatal("no scenarios found")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			sc := filepath.Join(scenarios, name)
			patch, err := os.ReadFile(filepath.Join(sc, "patch.txt"))
			if err != nil {
				t.Fatal(err)
			}
			ws, dir := newHostWorkspace(t)
			if _, err := os.Stat(filepath.Join(sc, "input")); err == nil {
				copyTree(t, filepath.Join(sc, "input"), dir)
			}
			args, _ := json.Marshal(map[string]string{"input": string(patch)})
			out, err := NewApplyPatch(ws, FilesystemOptions{}).Call(context.Background(), string(args))
			t.Logf("output: %q, error: %v", out.Text, err)
			want := snapshot(t, filepath.Join(sc, "expected"))
			got := snapshot(t, dir)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("workspace differs from expected/ (-want +got):\n%s", diff)
			}
		})
	}
}

// TestApplyPatchConformanceVendored checks the vendored suite against its
// SHA256SUMS, so a checkout that rewrote line endings (or an edited
// fixture) fails here instead of judging the tool against other bytes.
func TestApplyPatchConformanceVendored(t *testing.T) {
	base := filepath.Join("testdata", "apply_patch")
	sums, err := os.ReadFile(filepath.Join(base, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		want, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: malformed line %q", line)
		}
		b, err := os.ReadFile(filepath.Join(base, filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != want {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", name, got, want)
		}
		n++
	}
	if n == 0 {
		t.Fatal("SHA256SUMS lists no files")
	}
}
