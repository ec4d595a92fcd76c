package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentctl/agentctl/providers/local"
)

func TestMain(m *testing.M) {
	// Namespaced local sandboxes re-execute this binary as their init.
	local.MaybeRunInit()
	testscript.Main(m, map[string]func(){
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
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", examples)
			return nil
		},
	})
}
