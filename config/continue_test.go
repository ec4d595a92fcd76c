package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const continueBase = `
provider "scripted" {
  script "analyst" {
    reply { text = "first" }
  }
}
provider "local" {}
sandbox "box" {
  provider = provider.local
}
sandbox "other" {
  provider = provider.local
}
agent "analyst" {
  model = "m"
}
agent "boxed" {
  model   = "m"
  sandbox = sandbox.other
}
run "first" {
  agent   = agent.analyst
  sandbox = sandbox.box
  input   = "look"
}
`

func TestContinueResolvesRunAndSandbox(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": continueBase + `
run "followup" {
  agent    = agent.analyst
  input    = "and then?"
  continue = run.first
}
run "own" {
  agent    = agent.analyst
  sandbox  = sandbox.other
  input    = "x"
  continue = run.followup
}
run "agentbox" {
  agent    = agent.boxed
  input    = "x"
  continue = run.followup
}
run "chained" {
  agent    = agent.analyst
  input    = "x"
  continue = run.followup
}
`}, Options{})
	for addr, want := range map[string]struct{ cont, sandbox string }{
		"run.followup": {"run.first", "sandbox.box"}, // inherits run.first's sandbox
		"run.own":      {"run.followup", "sandbox.other"},
		"run.agentbox": {"run.followup", ""}, // its agent names its own
		"run.chained":  {"run.followup", "sandbox.box"},
		"run.first":    {"", "sandbox.box"},
	} {
		ri := c.RunInstances[addr]
		if ri.Continue != want.cont || ri.Sandbox != want.sandbox {
			t.Errorf("%s: Continue %q, Sandbox %q; want %q, %q", addr, ri.Continue, ri.Sandbox, want.cont, want.sandbox)
		}
	}
	if diff := cmp.Diff([]string{"run.first"}, c.RunInstances["run.followup"].DependsOn); diff != "" {
		t.Errorf("DependsOn (-want +got):\n%s", diff)
	}
	if got := c.RunSandboxes(c.RunInstances["run.followup"]); !cmp.Equal(got, []string{"sandbox.box"}) {
		t.Errorf("RunSandboxes(run.followup) = %v", got)
	}
	g, diags := c.DependencyGraph()
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if !g.HasEdge("run.followup", "run.first") {
		t.Error("no graph edge run.followup -> run.first")
	}
}

func TestContinueForEach(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": continueBase + `
run "many" {
  for_each = toset(["a", "b"])
  agent    = agent.analyst
  sandbox  = sandbox.box
  input    = each.key
}
run "next" {
  for_each = toset(["a", "b"])
  agent    = agent.analyst
  input    = "more"
  continue = run.many[each.key]
}
run "pick" {
  agent    = agent.analyst
  input    = "more"
  continue = run.many["b"]
}
`}, Options{})
	for addr, want := range map[string]string{
		`run.next["a"]`: `run.many["a"]`,
		`run.next["b"]`: `run.many["b"]`,
		`run.pick`:      `run.many["b"]`,
	} {
		if got := c.RunInstances[addr].Continue; got != want {
			t.Errorf("%s continues %q, want %q", addr, got, want)
		}
		if !strings.Contains(strings.Join(c.RunInstances[addr].DependsOn, " "), want) {
			t.Errorf("%s DependsOn = %v, want %s", addr, c.RunInstances[addr].DependsOn, want)
		}
	}
}

func TestContinueDiagnostics(t *testing.T) {
	cases := []struct {
		name, runs string
		line       int // of the first diagnostic, in runs (1-based, after continueBase)
		summary    string
		want       string
	}{
		{"missing run", `run "f" {
  agent    = agent.analyst
  input    = "x"
  continue = run.frist
}`, 4, "Reference to undeclared run", `Did you mean "first"?`},
		{"itself", `run "f" {
  agent    = agent.analyst
  input    = "x"
  continue = run.f
}`, 4, "Run continues itself", "can't continue its own conversation"},
		{"quoted", `run "f" {
  agent    = agent.analyst
  input    = "x"
  continue = "run.first"
}`, 4, "Invalid continue", "like continue = run.NAME"},
		{"output", `run "f" {
  agent    = agent.analyst
  input    = "x"
  continue = run.first.output
}`, 4, "Invalid continue", "not its output"},
		{"collection", `run "m" {
  for_each = toset(["a"])
  agent    = agent.analyst
  input    = "x"
}
run "f" {
  agent    = agent.analyst
  input    = "x"
  continue = run.m
}`, 9, "Run instance not selected", `run.NAME["KEY"]`},
		{"bad key", `run "m" {
  for_each = toset(["a"])
  agent    = agent.analyst
  input    = "x"
}
run "f" {
  agent    = agent.analyst
  input    = "x"
  continue = run.m["z"]
}`, 9, "Invalid index", "continue names the run"},
		{"cycle", `run "f" {
  agent    = agent.analyst
  input    = "x"
  continue = run.g
}
run "g" {
  agent    = agent.analyst
  input    = "x"
  continue = run.f
}`, 1, "Dependency cycle", "a continue argument"},
		{"script for undeclared run", `provider "scripted" {
  alias = "s2"
  script "analyst" {
    run = "folowup"
    reply { text = "x" }
  }
}
run "followup" {
  agent = agent.analyst
  input = "x"
}`, 4, "Script for undeclared run", `no run block with that name. Did you mean "followup"?`},
	}
	base := strings.Count(continueBase, "\n")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load(t, map[string]string{"main.hcl": continueBase + tc.runs + "\n"}, Options{})
			if !diags.HasErrors() {
				t.Fatal("no diagnostics")
			}
			d := diags[0]
			if d.Summary != tc.summary || !strings.Contains(d.Detail, tc.want) {
				t.Fatalf("got %q: %q; want %q containing %q (all: %v)", d.Summary, d.Detail, tc.summary, tc.want, diags)
			}
			if d.Subject == nil || d.Subject.Start.Line != base+tc.line {
				t.Errorf("located at %v, want line %d", d.Subject, base+tc.line)
			}
		})
	}
}
