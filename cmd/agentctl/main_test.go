package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentctl/agentctl/internal/mcptest"
	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/providers/local"
)

func TestMain(m *testing.M) {
	// Namespaced local sandboxes re-execute this binary as their init.
	local.MaybeRunInit()
	testscript.Main(stopPG{m}, map[string]func(){
		"agentctl": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Environ())) },
	})
}

// TestScript runs the CLI scripts in testdata/script. $EXAMPLES is the
// repository's examples directory.
func TestScript(t *testing.T) {
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	// The MCP go-sdk's memory example server, for the scripts that use a
	// real MCP server ($MCP_MEMORY_SERVER; they skip without it, and fail
	// under AGENTCTL_TEST_STRICT=1).
	memoryServer, err := mcptest.Build("memory")
	if err != nil {
		if testenv.Strict() {
			t.Fatalf("%s=1 but the MCP example server cannot be built: %v", testenv.StrictVar, err)
		}
		t.Logf("the MCP scripts skip: %v", err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// A copy without the state an example's apply left in the
			// source tree (the README's first command), so the scripts
			// see the examples as committed.
			copied := filepath.Join(env.WorkDir, "examples")
			if err := copyExamples(examples, copied); err != nil {
				return err
			}
			env.Setenv("EXAMPLES", copied)
			// Every state change the commands append is read back and
			// compared (state/local/log.go).
			env.Setenv("AGENTCTL_STATE_VERIFY", "1")
			if memoryServer != "" {
				env.Setenv("MCP_MEMORY_SERVER", memoryServer)
			}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "mcp":
				return memoryServer != "", nil
			case "root":
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// copyExamples copies the examples directory src to dst, leaving out
// the state directories (.agentctl) applies made there.
func copyExamples(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && d.Name() == ".agentctl":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
}
