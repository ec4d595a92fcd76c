package layering

import (
	"errors"
	"fmt"
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
	found, _ := initTrace(t, bin, nil)
	if len(found) < 50 {
		t.Fatalf("inittrace printed %d package lines, want one per initialized package", len(found))
	}
	for _, p := range found {
		if p.bytes > initAllocLimit {
			t.Errorf("package %s allocates %d bytes at initialization (limit %d): every agentctl process pays for it; build such values on first use, or use a library that does", p.path, p.bytes, initAllocLimit)
		}
	}

	// The sandbox's init (providers/local/internal/nsinit) starts while
	// its package is initialized; with an invalid descriptor in its
	// variable it stops right there (exit 125), so the trace lists what
	// was initialized before it. Importing a package such as net,
	// path/filepath or runtime/debug there makes it wait for most
	// third-party packages (about 2 MB of their initialization, against
	// about 0.1 MB today).
	const initBeforeLimit = 384 << 10
	found, code := initTrace(t, bin, []string{"_AGENTCTL_SANDBOX_INIT=x"})
	if code != 125 {
		t.Fatalf("agentctl as the sandbox init with an invalid descriptor: exit %d, want 125", code)
	}
	total := 0
	var heavy []string
	for _, p := range found {
		total += p.bytes
		if p.bytes > 32<<10 {
			heavy = append(heavy, fmt.Sprintf("%s (%d bytes)", p.path, p.bytes))
		}
	}
	if total > initBeforeLimit {
		t.Errorf("%d packages allocating %d bytes are initialized before the sandbox's init starts (limit %d), among them %s: keep internal/nsinit's imports to what the earliest packages need", len(found), total, initBeforeLimit, strings.Join(heavy, ", "))
	}
}

type initTraced struct {
	path  string
	bytes int
}

// initTrace runs bin with GODEBUG=inittrace=1 and env added and returns
// the packages whose initialization it reported, in order, and the exit
// code.
func initTrace(t *testing.T, bin string, env []string) ([]initTraced, int) {
	t.Helper()
	args := []string{"version"}
	if env != nil {
		args = nil
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "GODEBUG=inittrace=1"), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", bin, err)
	}
	if env == nil && err != nil {
		t.Fatalf("agentctl version: %v\n%s", err, stderr.String())
	}
	// init github.com/x/y @0.31 ms, 0.058 ms clock, 4096 bytes, 12 allocs
	re := regexp.MustCompile(`(?m)^init (\S+) @\S+ ms, \S+ ms clock, (\d+) bytes, \d+ allocs$`)
	var out []initTraced
	for _, m := range re.FindAllStringSubmatch(stderr.String(), -1) {
		n, _ := strconv.Atoi(m[2])
		out = append(out, initTraced{m[1], n})
	}
	return out, cmd.ProcessState.ExitCode()
}
