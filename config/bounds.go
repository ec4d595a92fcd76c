package config

// Bounds on what a configuration can make agentctl do before anything
// runs: a hostile or broken file gets a located diagnostic in bounded time
// and memory, never a crash or a hang. docs/language.md ("Limits") lists
// the limits.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar"
	"github.com/hashicorp/go-cty-funcs/crypto"
	"github.com/hashicorp/go-cty-funcs/filesystem"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/json"
	ctyyaml "github.com/zclconf/go-cty-yaml"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"go.yaml.in/yaml/v3"

	"github.com/agentctl/agentctl/internal/filekind"
)

const (
	// MaxFileBytes is the largest file agentctl reads as configuration,
	// variables file, or through file(), filebase64() and templatefile().
	MaxFileBytes = 16 << 20
	// MaxNesting is the deepest nesting of brackets, braces, parentheses,
	// template interpolations and unary operators a file or expression
	// may have. The HCL parser recurses once per level; far deeper input
	// would exhaust its stack.
	MaxNesting = 256
	// MaxFilesetEntries bounds the files and directories fileset() visits.
	MaxFilesetEntries = 100_000
	// MaxBcryptCost bounds bcrypt()'s cost: each step doubles the time,
	// and cost 14 already takes about a second.
	MaxBcryptCost = 14
	// MaxDiagnostics is how many errors one load reports; the rest are
	// counted in a last diagnostic.
	MaxDiagnostics = 50
)

// ReadSourceFile reads path, which must be a regular file of at most
// MaxFileBytes. It opens without blocking, so a FIFO is refused instead
// of waiting forever for a writer, and checks the opened file itself.
func ReadSourceFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s grew past %d MiB while it was read", path, MaxFileBytes>>20)
	}
	return b, nil
}

// checkRegular refuses what is not a regular file of at most MaxFileBytes.
func checkRegular(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s): only regular files can be read", path, filekind.Name(fi.Mode()))
	}
	if fi.Size() > MaxFileBytes {
		return fmt.Errorf("%s is %d bytes, more than the %d MiB a configuration may read from one file", path, fi.Size(), MaxFileBytes>>20)
	}
	return nil
}

// parseFile reads and parses one configuration or variables file (HCL,
// or JSON for names ending in .json), checking its size, kind and nesting
// depth before the parser sees it.
func parseFile(path string) (*hcl.File, hcl.Diagnostics) {
	src, err := ReadSourceFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read file",
			Detail:   fmt.Sprintf("The file %q could not be read: %s.", path, err),
		}}
	}
	return ParseSource(src, path)
}

// ParseSource parses src as the file named filename (JSON when it ends in
// .json, HCL otherwise) after checking its nesting depth.
func ParseSource(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	// A file refused before parsing still has its bytes, for snippets.
	refused := &hcl.File{Bytes: src, Body: hcl.EmptyBody()}
	if strings.HasSuffix(filename, ".json") {
		if d := checkJSONNesting(src, filename); d != nil {
			return refused, hcl.Diagnostics{d}
		}
		return json.Parse(src, filename)
	}
	return lexChecked(src, filename, hclsyntax.LexConfig, hclsyntax.ParseConfig, refused)
}

// parseExpression parses src as one HCL expression after checking its
// nesting depth.
func parseExpression(src []byte, filename string) (hclsyntax.Expression, hcl.Diagnostics) {
	return lexChecked(src, filename, hclsyntax.LexExpression, hclsyntax.ParseExpression, nil)
}

// parseTemplate parses src as an HCL template after checking its nesting
// depth.
func parseTemplate(src []byte, filename string) (hclsyntax.Expression, hcl.Diagnostics) {
	return lexChecked(src, filename, hclsyntax.LexTemplate, hclsyntax.ParseTemplate, nil)
}

// lexChecked lexes src with lex (linear, no recursion) and parses it
// with parse only if no token is nested deeper than MaxNesting;
// otherwise it returns refused with the nesting diagnostic.
func lexChecked[T any](src []byte, filename string,
	lex func([]byte, string, hcl.Pos) (hclsyntax.Tokens, hcl.Diagnostics),
	parse func([]byte, string, hcl.Pos) (T, hcl.Diagnostics), refused T) (T, hcl.Diagnostics) {
	start := hcl.Pos{Line: 1, Column: 1}
	toks, _ := lex(src, filename, start)
	if d := checkNesting(toks); d != nil {
		return refused, hcl.Diagnostics{d}
	}
	return parse(src, filename, start)
}

// checkNesting reports the first token nested deeper than MaxNesting.
// Lexing is linear and does not recurse, so this runs before the parser.
func checkNesting(toks hclsyntax.Tokens) *hcl.Diagnostic {
	depth, unary := 0, 0
	for _, t := range toks {
		switch t.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl, hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc:
			depth++
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen,
			hclsyntax.TokenTemplateSeqEnd, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc:
			depth = max(depth-1, 0)
		}
		// A run of unary operators (!!!!x, - - - x) nests as deeply.
		if t.Type == hclsyntax.TokenBang || t.Type == hclsyntax.TokenMinus {
			unary++
		} else {
			unary = 0
		}
		if depth+unary > MaxNesting {
			rng := t.Range
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Nesting too deep",
				Detail:   fmt.Sprintf("Brackets, braces, parentheses, templates and unary operators are nested more than %d levels deep here; agentctl refuses such input before parsing it. Flatten the expression, or build it from locals.", MaxNesting),
				Subject:  &rng,
			}
		}
	}
	return nil
}

// checkJSONNesting is checkNesting for JSON: brackets and braces outside
// strings.
func checkJSONNesting(src []byte, filename string) *hcl.Diagnostic {
	depth, inString, escaped := 0, false, false
	line, col := 1, 1
	for i, c := range src {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > MaxNesting {
				pos := hcl.Pos{Line: line, Column: col, Byte: i}
				return &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Nesting too deep",
					Detail:   fmt.Sprintf("Arrays and objects are nested more than %d levels deep here; agentctl refuses such input before parsing it.", MaxNesting),
					Subject:  &hcl.Range{Filename: filename, Start: pos, End: hcl.Pos{Line: line, Column: col + 1, Byte: i + 1}},
				}
			}
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
		}
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return nil
}

// CapDiagnostics keeps the first MaxDiagnostics errors (and every
// warning up to the same count) and adds one that counts the rest, so a
// file of garbage yields a readable report rather than megabytes.
func CapDiagnostics(diags hcl.Diagnostics) hcl.Diagnostics {
	if len(diags) <= MaxDiagnostics {
		return diags
	}
	out := append(hcl.Diagnostics(nil), diags[:MaxDiagnostics]...)
	rest := diags[MaxDiagnostics:]
	errs := 0
	for _, d := range rest {
		if d.Severity == hcl.DiagError {
			errs++
		}
	}
	sev, what := hcl.DiagWarning, fmt.Sprintf("%d more warnings", len(rest))
	if errs > 0 {
		sev, what = hcl.DiagError, fmt.Sprintf("%d more diagnostics (%d errors)", len(rest), errs)
	}
	return append(out, &hcl.Diagnostic{
		Severity: sev,
		Summary:  "Too many diagnostics",
		Detail:   fmt.Sprintf("%s not shown; fix the ones above first.", what),
	})
}

// expandPath resolves a path argument of a file function as go-cty-funcs
// does: ~ expanded, relative to baseDir, cleaned.
func expandPath(baseDir, p string) (string, error) {
	v, err := filesystem.PathExpandFunc.Call([]cty.Value{cty.StringVal(p)})
	if err != nil {
		return "", err
	}
	p = v.AsString()
	if !filepath.IsAbs(p) {
		p = filepath.Join(baseDir, p)
	}
	return filepath.Clean(p), nil
}

// boundedFileFunc is go-cty-funcs' file() or filebase64() for regular
// files of at most MaxFileBytes only: /dev/zero, a FIFO or a huge file is
// an error naming it, not an endless read or a hang.
func boundedFileFunc(baseDir string, base64 bool) function.Function {
	inner := filesystem.MakeFileFunc(baseDir, base64)
	return function.New(&function.Spec{
		Description: inner.Description(),
		Params:      inner.Params(),
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, err := expandPath(baseDir, args[0].AsString())
			if err != nil {
				return cty.UnknownVal(cty.String), err
			}
			fi, err := os.Stat(p)
			if err != nil {
				return cty.UnknownVal(cty.String), err
			}
			if err := checkRegular(p, fi); err != nil {
				return cty.UnknownVal(cty.String), err
			}
			return inner.Call(args)
		},
	})
}

// filesetFunc is fileset(path, pattern) as go-cty-funcs has it (the
// regular files under path matching the doublestar pattern, relative to
// path, with / separators), walking at most MaxFilesetEntries files and
// directories: fileset("/", "**") is an error, not a walk of the disk.
func filesetFunc(baseDir string) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the regular files under path that match pattern.",
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
			{Name: "pattern", Type: cty.String},
		},
		Type: function.StaticReturnType(cty.Set(cty.String)),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			root := args[0].AsString()
			if !filepath.IsAbs(root) {
				root = filepath.Join(baseDir, root)
			}
			root = filepath.Clean(root)
			pattern := filepath.ToSlash(filepath.Clean(args[1].AsString()))
			if _, err := doublestar.Match(pattern, "x"); err != nil {
				return cty.UnknownVal(cty.Set(cty.String)), fmt.Errorf("invalid pattern %q: %w", args[1].AsString(), err)
			}
			var matches []cty.Value
			seen := 0
			errTooMany := errors.New("too many")
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					if p == root {
						return err
					}
					return nil // unreadable entries are not matches
				}
				if seen++; seen > MaxFilesetEntries {
					return errTooMany
				}
				rel, err := filepath.Rel(root, p)
				if err != nil || rel == "." {
					return nil
				}
				rel = filepath.ToSlash(rel)
				if ok, _ := doublestar.Match(pattern, rel); !ok {
					return nil
				}
				// As go-cty-funcs: regular files, following a final link.
				if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
					matches = append(matches, cty.StringVal(rel))
				}
				return nil
			})
			if errors.Is(err, errTooMany) {
				return cty.UnknownVal(cty.Set(cty.String)), fmt.Errorf("more than %d files and directories under %s: narrow the path", MaxFilesetEntries, root)
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return cty.UnknownVal(cty.Set(cty.String)), err
			}
			if len(matches) == 0 {
				return cty.SetValEmpty(cty.String), nil
			}
			return cty.SetVal(matches), nil
		},
	})
}

// boundedBcryptFunc is go-cty-funcs' bcrypt() with its cost at most
// MaxBcryptCost.
func boundedBcryptFunc() function.Function {
	inner := crypto.BcryptFunc
	return function.New(&function.Spec{
		Description: inner.Description(),
		Params:      inner.Params(),
		VarParam:    inner.VarParam(),
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if len(args) > 1 {
				cost, _ := args[1].AsBigFloat().Int64()
				if cost > MaxBcryptCost {
					return cty.UnknownVal(cty.String), function.NewArgErrorf(1, "cost %d is above agentctl's limit of %d (each step doubles the time)", cost, MaxBcryptCost)
				}
			}
			return inner.Call(args)
		},
	})
}

// boundedYAMLDecodeFunc is go-cty-yaml's yamldecode() refusing documents
// whose aliases expand out of proportion (a "billion laughs" document),
// checked first with go.yaml.in/yaml/v3, which bounds alias expansion.
func boundedYAMLDecodeFunc() function.Function {
	inner := ctyyaml.YAMLDecodeFunc
	return function.New(&function.Spec{
		Description: inner.Description(),
		Params:      inner.Params(),
		Type: func(args []cty.Value) (cty.Type, error) {
			if err := checkYAMLAliases(args[0]); err != nil {
				return cty.NilType, err
			}
			return inner.ReturnTypeForValues(args)
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return inner.Call(args)
		},
	})
}

func checkYAMLAliases(v cty.Value) error {
	if !v.IsKnown() || v.IsNull() {
		return nil
	}
	var doc any
	dec := yaml.NewDecoder(strings.NewReader(v.AsString()))
	for {
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if strings.Contains(err.Error(), "excessive aliasing") {
				return fmt.Errorf("the YAML document expands its aliases out of proportion (%w); agentctl refuses it", err)
			}
			return nil // other errors are go-cty-yaml's to report
		}
	}
}
