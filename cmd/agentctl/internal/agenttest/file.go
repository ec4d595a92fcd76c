// Package agenttest is agentctl test: Terraform's test framework for
// agents. A test file (*.test.hcl beside the configuration, or in its
// tests/ directory) holds run blocks, each a plan or an apply of the
// configuration with its own variables and scripted model replies, and
// assert blocks over what the run did: run outputs and statuses, the
// tool calls made, files in a sandbox. Each file runs in a temporary
// state directory of its own, and its sandboxes are destroyed afterwards
// (docs/testing.md).
package agenttest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/agentctl/agentctl/config"
)

// Command is what a run block does.
type Command string

const (
	CommandApply Command = "apply"
	CommandPlan  Command = "plan"
)

// File is one parsed test file.
type File struct {
	// Path is the file's path as given; Name is how it is shown
	// (relative to the configuration's directory).
	Path, Name string
	HCL        *hcl.File
	Variables  map[string]config.Value
	Overrides  map[string]config.ProviderOverride
	Runs       []*Run
}

// Run is one run block.
type Run struct {
	Name      string
	Command   Command
	Variables map[string]config.Value
	Overrides map[string]config.ProviderOverride
	Asserts   []*Assert
	DeclRange hcl.Range
}

// Assert is one assert block.
type Assert struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

var (
	fileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "variables"},
		{Type: "override_provider", LabelNames: []string{"provider"}},
		{Type: "run", LabelNames: []string{"name"}},
	}}
	runSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "command"}},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "variables"},
			{Type: "override_provider", LabelNames: []string{"provider"}},
			{Type: "assert"},
		},
	}
	assertSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	}}
)

// Discover lists the test files of the configuration at cfgPath: for a
// directory, DIR/*.test.hcl and DIR/tests/*.test.hcl; for a file
// DIR/NAME.hcl, DIR/NAME.test.hcl and DIR/tests/NAME.test.hcl.
func Discover(cfgPath string) ([]string, error) {
	fi, err := os.Stat(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("configuration %s: %w", cfgPath, err)
	}
	var patterns []string
	if fi.IsDir() {
		patterns = []string{filepath.Join(cfgPath, "*.test.hcl"), filepath.Join(cfgPath, "tests", "*.test.hcl")}
	} else {
		dir, stem := filepath.Dir(cfgPath), strings.TrimSuffix(filepath.Base(cfgPath), ".hcl")
		patterns = []string{filepath.Join(dir, stem+".test.hcl"), filepath.Join(dir, "tests", stem+".test.hcl")}
	}
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, err
		}
		sort.Strings(m)
		out = append(out, m...)
	}
	return out, nil
}

// ParseFile reads and decodes one test file; name is how it is shown.
func ParseFile(path, name string) (*File, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Failed to read test file", Detail: fmt.Sprintf("%s.", err)}}
	}
	hf, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	f := &File{Path: path, Name: name, HCL: hf}
	if diags.HasErrors() {
		return f, diags
	}
	content, ds := hf.Body.Content(fileSchema)
	diags = append(diags, ds...)
	seen := map[string]hcl.Range{}
	for _, b := range content.Blocks {
		switch b.Type {
		case "variables":
			if f.Variables != nil {
				diags = append(diags, errorAt(b.DefRange, "Duplicate variables block", "A test file may have one file-level variables block: merge them."))
				continue
			}
			f.Variables, ds = decodeVariables(b)
			diags = append(diags, ds...)
		case "override_provider":
			f.Overrides = addOverride(f.Overrides, b, &diags)
		case "run":
			name := b.Labels[0]
			if !hclsyntax.ValidIdentifier(name) {
				diags = append(diags, errorAt(b.LabelRanges[0], "Invalid run name", fmt.Sprintf("%q is not a valid name: use letters, digits, underscores and dashes, starting with a letter.", name)))
				continue
			}
			if prev, ok := seen[name]; ok {
				diags = append(diags, errorAt(b.DefRange, "Duplicate run block", fmt.Sprintf("A run named %q was already declared at %s:%d. Run names must be unique within a test file.", name, prev.Filename, prev.Start.Line)))
				continue
			}
			seen[name] = b.DefRange
			r, ds := decodeRun(b)
			diags = append(diags, ds...)
			f.Runs = append(f.Runs, r)
		}
	}
	if len(f.Runs) == 0 && !diags.HasErrors() {
		diags = append(diags, errorAt(hf.Body.MissingItemRange(), "No run blocks", "A test file needs at least one run block: run \"NAME\" { assert { condition = ..., error_message = \"...\" } }."))
	}
	return f, diags
}

func decodeRun(b *hcl.Block) (*Run, hcl.Diagnostics) {
	r := &Run{Name: b.Labels[0], Command: CommandApply, DeclRange: b.DefRange}
	content, diags := b.Body.Content(runSchema)
	if a, ok := content.Attributes["command"]; ok {
		kw := hcl.ExprAsKeyword(a.Expr)
		if kw == "" {
			if v, ds := a.Expr.Value(nil); !ds.HasErrors() && v.Type().FriendlyName() == "string" && v.IsKnown() && !v.IsNull() {
				kw = v.AsString()
			}
		}
		switch Command(kw) {
		case CommandApply, CommandPlan:
			r.Command = Command(kw)
		default:
			diags = append(diags, errorAt(a.Expr.Range(), "Invalid command", "command must be apply or plan."))
		}
	}
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "variables":
			if r.Variables != nil {
				diags = append(diags, errorAt(blk.DefRange, "Duplicate variables block", "A run may have one variables block: merge them."))
				continue
			}
			vars, ds := decodeVariables(blk)
			diags = append(diags, ds...)
			r.Variables = vars
		case "override_provider":
			r.Overrides = addOverride(r.Overrides, blk, &diags)
		case "assert":
			ac, ds := blk.Body.Content(assertSchema)
			diags = append(diags, ds...)
			if ds.HasErrors() {
				continue
			}
			r.Asserts = append(r.Asserts, &Assert{Condition: ac.Attributes["condition"].Expr, ErrorMessage: ac.Attributes["error_message"].Expr, DeclRange: blk.DefRange})
		}
	}
	return r, diags
}

// decodeVariables reads a variables block: literal values (they may use
// functions, but no references).
func decodeVariables(b *hcl.Block) (map[string]config.Value, hcl.Diagnostics) {
	attrs, diags := b.Body.JustAttributes()
	out := map[string]config.Value{}
	for name, a := range attrs {
		if len(a.Expr.Variables()) > 0 {
			diags = append(diags, errorAt(a.Expr.Range(), "Variables not allowed", "A test's variable value must be a literal value; it can't refer to other objects."))
			continue
		}
		v, ds := a.Expr.Value(nil)
		diags = append(diags, ds...)
		if !ds.HasErrors() {
			out[name] = config.Value{Value: v, Range: a.Expr.Range()}
		}
	}
	return out, diags
}

// addOverride records an override_provider block, by the provider key its
// label names ("openai", "openai.ALIAS"; a leading "provider." is
// allowed).
func addOverride(m map[string]config.ProviderOverride, b *hcl.Block, diags *hcl.Diagnostics) map[string]config.ProviderOverride {
	key := strings.TrimPrefix(b.Labels[0], "provider.")
	if m == nil {
		m = map[string]config.ProviderOverride{}
	}
	if prev, ok := m[key]; ok {
		*diags = append(*diags, errorAt(b.DefRange, "Duplicate override_provider block", fmt.Sprintf("provider.%s is already overridden at %s:%d.", key, prev.DeclRange.Filename, prev.DeclRange.Start.Line)))
		return m
	}
	m[key] = config.ProviderOverride{Body: b.Body, DeclRange: b.DefRange}
	return m
}

func errorAt(rng hcl.Range, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()}
}
