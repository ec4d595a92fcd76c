package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// findConformance walks up from the package directory looking for
// shared/conformance/apply_patch (the repository sits beside shared/).
func findConformance(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		c := filepath.Join(dir, "shared", "conformance", "apply_patch")
		if fi, err := os.Stat(filepath.Join(c, "scenarios")); err == nil && fi.IsDir() {
			return c
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("shared/conformance/apply_patch not found above the package directory; check out shared/ beside the repository to run the conformance suite")
		}
		dir = parent
	}
}

// TestApplyPatchConformance runs every scenario of the apply_patch
// conformance suite through the apply_patch tool on a host-directory
// workspace and judges it as the suite's README says: the directory left
// behind must equal expected/ (same directories, same files, same bytes).
func TestApplyPatchConformance(t *testing.T) {
	base := findConformance(t)
	scenarios := filepath.Join(base, "scenarios")
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
