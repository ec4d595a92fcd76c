package config

import (
	"strings"
	"testing"
)

// TestHookDiagnostics: a hook's mistakes are errors where they are.
func TestHookDiagnostics(t *testing.T) {
	for name, tc := range map[string]struct {
		block   string
		line    int
		summary string
		detail  string
	}{
		"unknown event": {`agent "b" {
  provider = provider.scripted
  hook "tool_stat" { command = ["x"] }
}`, 3, "Unknown hook event", `Did you mean "tool_start"?`},
		"run_end on an agent": {`agent "b" {
  provider = provider.scripted
  hook "run_end" { command = ["x"] }
}`, 3, "Invalid hook event", "put this hook in the run block"},
		"empty command": {`run "r" {
  agent = agent.a
  input = "x"
  hook "run_end" { command = [] }
}`, 4, "Invalid hook command", "may not be empty"},
		"bad timeout": {`run "r" {
  agent = agent.a
  input = "x"
  hook "run_end" {
    command = ["x"]
    timeout = "soon"
  }
}`, 6, "Invalid duration", "timeout must be a duration"},
	} {
		t.Run(name, func(t *testing.T) {
			_, diags := load(t, map[string]string{"main.hcl": lifecycleBase + tc.block}, Options{})
			offset := strings.Count(lifecycleBase, "\n")
			for _, d := range diags {
				if d.Summary == tc.summary && strings.Contains(d.Detail, tc.detail) && d.Subject != nil && d.Subject.Start.Line == offset+tc.line {
					return
				}
			}
			t.Fatalf("want %q (%q) at line %d, got %s", tc.summary, tc.detail, offset+tc.line, diags.Error())
		})
	}
}
