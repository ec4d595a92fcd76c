package layering

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// packageTable returns the packages the table under "## Packages" in
// doc (docs/architecture.md) names in its first column: every
// `backquoted` path there, with one {a,b,...} group expanded
// (providers/{local,docker} names providers/local and providers/docker).
func packageTable(doc string) ([]string, error) {
	_, section, ok := strings.Cut(doc, "\n## Packages\n")
	if !ok {
		return nil, errors.New(`no "## Packages" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	var out []string
	rows := 0
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			continue
		}
		rows++
		if rows <= 2 { // the header and its rule
			continue
		}
		quoted := strings.Split(cells[1], "`")
		for i := 1; i < len(quoted); i += 2 {
			out = append(out, expandBraces(strings.TrimSpace(quoted[i]))...)
		}
	}
	if len(out) == 0 {
		return nil, errors.New(`no package table under "## Packages"`)
	}
	return out, nil
}

// expandBraces expands one {a,b,...} group of p.
func expandBraces(p string) []string {
	open, end := strings.Index(p, "{"), strings.Index(p, "}")
	if open < 0 || end < open {
		return []string{p}
	}
	var out []string
	for alt := range strings.SplitSeq(p[open+1:end], ",") {
		out = append(out, p[:open]+strings.TrimSpace(alt)+p[end+1:])
	}
	return out
}

// tableDrift compares the packages the document lists with the module's:
// missing are packages it does not list, extra listed ones that do not
// exist.
func tableDrift(listed, pkgs []string) (missing, extra []string) {
	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			missing = append(missing, p)
		}
	}
	for _, p := range listed {
		if !slices.Contains(pkgs, p) && !slices.Contains(extra, p) {
			extra = append(extra, p)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}

// TestArchitectureListsEveryPackage: docs/architecture.md's package table
// names every package of the module (as go list ./... lists them) and
// no package that does not exist, so the map cannot drift from the code.
func TestArchitectureListsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	listed, err := packageTable(string(doc))
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	var pkgs []string
	for p := range imports(t) {
		if p != "." {
			pkgs = append(pkgs, p)
		}
	}
	missing, extra := tableDrift(listed, pkgs)
	if len(missing) > 0 {
		t.Errorf("docs/architecture.md's package table (## Packages) does not list %s: add each to a row's first column, saying what it owns", strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		t.Errorf("docs/architecture.md's package table (## Packages) lists %s, which go list ./... does not: remove or rename them", strings.Join(extra, ", "))
	}
}

func TestPackageTableDrift(t *testing.T) {
	doc := "# Architecture\n\n## Packages\n\nIntro.\n\n| Package | Owns |\n|---|---|\n" +
		"| `addrs` | Addresses; not `engine`. |\n" +
		"| `providers/{local, docker}`, `gone` | Providers. |\n" +
		"\n## Import rules\n\n| `state` | x |\n"
	listed, err := packageTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"addrs", "providers/local", "providers/docker", "gone"}; !slices.Equal(listed, want) {
		t.Fatalf("listed %q, want %q", listed, want)
	}
	missing, extra := tableDrift(listed, []string{"addrs", "providers/local", "providers/docker", "engine", "state"})
	if !slices.Equal(missing, []string{"engine", "state"}) || !slices.Equal(extra, []string{"gone"}) {
		t.Errorf("missing %q, extra %q; want [engine state] and [gone]", missing, extra)
	}
	if _, err := packageTable("# Architecture\n\nNo table.\n"); err == nil {
		t.Error("a document without the section was accepted")
	}
}
