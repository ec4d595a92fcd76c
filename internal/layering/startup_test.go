package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// eagerCalls are calls that must not run while a package agentctl links
// is initialized: every agentctl process pays for package
// initialization, the sandbox init included, whether the value is used
// or not. Build such values on first use (sync.OnceValue).
var eagerCalls = map[string][]string{
	"regexp": {"Compile", "MustCompile", "CompilePOSIX", "MustCompilePOSIX"},
	"crc32":  {"MakeTable"},
	"crc64":  {"MakeTable"},
}

// TestNoEagerPackageState fails when a package-level variable of a
// package linked into cmd/agentctl is initialized with one of
// eagerCalls (outside a function literal, which runs later).
func TestNoEagerPackageState(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	deps := imports(t)
	linked := map[string]bool{}
	var visit func(pkg string)
	visit = func(pkg string) {
		if linked[pkg] {
			return
		}
		linked[pkg] = true
		for _, imp := range deps[pkg] {
			visit(imp)
		}
	}
	visit("cmd/agentctl")
	for pkg := range linked {
		dir := filepath.Join(root, filepath.FromSlash(pkg))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				ast.Inspect(gd, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.FuncLit:
						return false
					case *ast.CallExpr:
						sel, ok := n.Fun.(*ast.SelectorExpr)
						if !ok {
							return true
						}
						if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(eagerCalls[x.Name], sel.Sel.Name) {
							t.Errorf("%s: %s.%s at package initialization: build the value on first use (sync.OnceValue)", fset.Position(n.Pos()), x.Name, sel.Sel.Name)
						}
					}
					return true
				})
			}
		}
	}
}
