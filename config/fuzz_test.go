package config

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/agentctl/agentctl/config/diagfmt"
	"github.com/agentctl/agentctl/providers/builtin"
)

// FuzzLoad loads arbitrary bytes as a configuration file and renders its
// diagnostics: it must never panic or hang, and an accepted configuration
// must support the rest of the API. The seed corpus is in
// testdata/fuzz/FuzzLoad (the examples and malformed configurations).
func FuzzLoad(f *testing.F) {
	examples, _ := filepath.Glob("../examples/*.hcl")
	for _, e := range examples {
		if b, err := os.ReadFile(e); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(pipeline))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, diags := Load(dir, Options{Registry: builtin.Registry(), Environ: []string{"AGENTCTL_VAR_x=1", "HOME=/nonexistent"}})
		if c == nil {
			t.Fatal("Load returned a nil config for an existing file")
		}
		_ = diagfmt.WriteHuman(io.Discard, diags, c.Files, true)
		_ = diagfmt.WriteJSON(io.Discard, diags, c.Files)
		if diags.HasErrors() {
			return
		}
		g, _ := c.DependencyGraph()
		if len(g.Cycles()) > 0 {
			t.Fatalf("valid configuration with a dependency cycle: %v", g.Cycles())
		}
		_ = c.AgentGraph().DOT("agents")
		rv := RuntimeValues{RunOutputs: map[string]cty.Value{}}
		for addr := range c.RunInstances {
			rv.RunOutputs[addr] = cty.StringVal("out")
		}
		for _, ri := range c.RunInstances {
			_, _ = c.EvalRunInput(ri, rv)
		}
		_, _ = c.EvalOutputs(rv)
		_ = c.SensitiveValues()
	})
}
