package config

import (
	"regexp"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// The collection conversions' fast path gives what go-cty gives: a set
// drops duplicates, mixed element types still unify, and sensitive
// elements keep their marks (through go-cty).
func TestToCollectionFunctions(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": `
variable "secret" {
  default   = "s3cret"
  sensitive = true
}
locals {
  set     = toset(["b", "a", "b"])
  mixed   = tolist(["a", 1, true])
  nums    = tolist([1, 2, 3])
  map     = tomap({ x = "1", y = "2" })
  mixmap  = tomap({ x = "1", y = 2 })
  marked  = toset(["a", var.secret])
}
output "set"    { value = local.set }
output "mixed"  { value = local.mixed }
output "nums"   { value = local.nums }
output "map"    { value = local.map }
output "mixmap" { value = local.mixmap }
output "marked" {
  value     = local.marked
  sensitive = true
}
`}, Options{})
	want := map[string]cty.Value{
		"set":    cty.SetVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}),
		"mixed":  cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("1"), cty.StringVal("true")}),
		"nums":   cty.ListVal([]cty.Value{cty.NumberIntVal(1), cty.NumberIntVal(2), cty.NumberIntVal(3)}),
		"map":    cty.MapVal(map[string]cty.Value{"x": cty.StringVal("1"), "y": cty.StringVal("2")}),
		"mixmap": cty.MapVal(map[string]cty.Value{"x": cty.StringVal("1"), "y": cty.StringVal("2")}),
	}
	for name, w := range want {
		if got := c.locals[name]; !got.RawEquals(w) {
			t.Errorf("local.%s = %#v, want %#v", name, got, w)
		}
	}
	if m, marks := c.locals["marked"].UnmarkDeep(); len(marks) == 0 || m.LengthInt() != 2 {
		t.Errorf("local.marked = %#v: want two elements, marked sensitive", m)
	}
}

// Relative fileset paths are as go-cty-funcs gives them: regular files
// only, relative to the path, with / separators.
func TestFileset(t *testing.T) {
	c := mustLoad(t, map[string]string{
		"main.hcl":      `locals { x = fileset("docs", "**/*.md") }`,
		"docs/a.md":     "a",
		"docs/b/c.md":   "c",
		"docs/b/d.txt":  "d",
		"docs/e.md/f":   "a directory named like a match is not a file",
		"other/skip.md": "outside the path",
	}, Options{})
	got := c.locals["x"]
	want := cty.SetVal([]cty.Value{cty.StringVal("a.md"), cty.StringVal("b/c.md")})
	if !got.RawEquals(want) {
		t.Errorf("fileset = %#v, want %#v", got, want)
	}
	_, diags := load(t, map[string]string{"main.hcl": `locals { x = fileset(".", "[") }`}, Options{})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "invalid pattern") {
		t.Errorf("bad pattern: %v", diags)
	}
}

func TestCapDiagnostics(t *testing.T) {
	_, diags := load(t, map[string]string{"main.hcl": strings.Repeat("@", 200)}, Options{})
	if len(diags) != MaxDiagnostics+1 {
		t.Fatalf("%d diagnostics, want %d", len(diags), MaxDiagnostics+1)
	}
	last := diags[len(diags)-1]
	if last.Summary != "Too many diagnostics" || !regexp.MustCompile(`^1[0-9][0-9] more diagnostics \(1[0-9][0-9] errors\) not shown`).MatchString(last.Detail) {
		t.Errorf("last diagnostic: %s: %s", last.Summary, last.Detail)
	}
}
