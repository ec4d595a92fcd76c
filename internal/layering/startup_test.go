package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// initAllocLimit is the most one package's initialization may allocate
// in agentctl. Every agentctl process pays for every package's init, the
// sandbox's init included; a library that builds large tables or
// compiles schemas at init (santhosh-tekuri/jsonschema compiled five
// drafts' metaschemas, 1.7 MB, 5 ms and a GC cycle, before
// internal/jsonschema replaced it) shows up here first. The largest
// today are distribution/reference's regular expressions (about 0.4 MB).
const initAllocLimit = 512 << 10

// TestPackageInitAllocations builds agentctl and runs `agentctl version`
// with GODEBUG=inittrace=1, which reports the bytes each package's
// initialization allocated (a count, not a time: the same on every
// machine), and fails for any package over initAllocLimit.
func TestPackageInitAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agentctl")
	}
	bin := filepath.Join(t.TempDir(), "agentctl")
	build := exec.Command("go", "build", "-o", bin, "github.com/agentctl/agentctl/cmd/agentctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentctl version: %v\n%s", err, stderr.String())
	}
	// init github.com/x/y @0.31 ms, 0.058 ms clock, 4096 bytes, 12 allocs
	re := regexp.MustCompile(`(?m)^init (\S+) @\S+ ms, \S+ ms clock, (\d+) bytes, \d+ allocs$`)
	found := re.FindAllStringSubmatch(stderr.String(), -1)
	if len(found) < 50 {
		t.Fatalf("inittrace printed %d package lines, want one per initialized package:\n%s", len(found), stderr.String())
	}
	for _, m := range found {
		n, _ := strconv.Atoi(m[2])
		if n > initAllocLimit {
			t.Errorf("package %s allocates %d bytes at initialization (limit %d): every agentctl process pays for it; build such values on first use, or use a library that does", m[1], n, initAllocLimit)
		}
	}
}
