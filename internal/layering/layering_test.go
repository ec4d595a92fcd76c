package layering

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/agentctl/agentctl"

func match(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func matchAny(patterns []string, pkg string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, pkg) })
}

// imports returns every package of the module (module-relative path) with
// the module packages its non-test files import: the packages go list ./...
// lists (testdata, dot directories and nested modules left out).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
			return filepath.SkipDir // another module
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, imp := range pkg.Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				out[rel] = append(out[rel], r)
			}
		}
		if _, ok := out[rel]; !ok {
			out[rel] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// violations lists every import of pkgs that a rule forbids.
func violations(pkgs map[string][]string) []string {
	var out []string
	for pkg, imps := range pkgs {
		for _, imp := range imps {
			for _, r := range Rules {
				if matchAny(r.From, pkg) && matchAny(r.To, imp) {
					out = append(out, pkg+" imports "+imp+": not allowed ("+r.Why+"); see docs/architecture.md")
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestImportRules(t *testing.T) {
	pkgs := imports(t)
	for _, must := range []string{"engine", "config", "state", "sandbox", "providers/local", "cmd/agentctl"} {
		if _, ok := pkgs[must]; !ok {
			t.Fatalf("package %s not found: the walk is broken (found %d packages)", must, len(pkgs))
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

func TestViolationsFound(t *testing.T) {
	got := violations(map[string][]string{
		"providers/docker": {"sandbox", "engine/agentloop"},
		"state":            {"sandbox", "model", "config"},
		"config":           {"graph", "addrs"},
		"engine":           {"config", "state", "sandbox"},
	})
	want := []string{"providers/docker imports engine/agentloop", "state imports config"}
	if len(got) != len(want) {
		t.Fatalf("violations = %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]+":") {
			t.Errorf("violation %d = %q, want %q...", i, got[i], want[i])
		}
	}
}
