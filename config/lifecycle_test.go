package config

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

const lifecycleBase = `
variable "tickers" { default = [] }
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
provider "local" {}
agent "a" {
  provider = provider.scripted
}
run "up" {
  agent = agent.a
  input = "go"
}
`

// TestLifecycleDiagnostics: every misuse of a lifecycle block is an error
// at the line it is on.
func TestLifecycleDiagnostics(t *testing.T) {
	for name, tc := range map[string]struct {
		block   string
		line    int // of block, 1 = its first line
		summary string
		detail  string
	}{
		"self in a precondition": {`run "r" {
  agent = agent.a
  input = "x"
  lifecycle {
    precondition {
      condition     = self.status == "completed"
      error_message = "no"
    }
  }
}`, 6, "Invalid reference to self", "use it in a postcondition"},
		"unknown self attribute": {`run "r" {
  agent = agent.a
  input = "x"
  lifecycle {
    postcondition {
      condition     = self.outptu != ""
      error_message = "no"
    }
  }
}`, 6, "Invalid attribute of self", `Did you mean "output"?`},
		"missing error_message": {`run "r" {
  agent = agent.a
  input = "x"
  lifecycle {
    postcondition {
      condition = true
    }
  }
}`, 5, "Missing required argument", `"error_message" is required`},
		"undeclared run": {`run "r" {
  agent = agent.a
  input = "x"
  lifecycle {
    precondition {
      condition     = run.nope.output != ""
      error_message = "no"
    }
  }
}`, 6, "Reference to undeclared run", `no run named "nope"`},
		"duplicate lifecycle": {`run "r" {
  agent = agent.a
  input = "x"
  lifecycle {}
  lifecycle {}
}`, 5, "Duplicate lifecycle block", "one lifecycle block"},
		"sandbox precondition fails": {`sandbox "s" {
  provider = provider.local
  lifecycle {
    precondition {
      condition     = length(var.tickers) > 0
      error_message = "no tickers"
    }
  }
}`, 5, "Precondition failed", "sandbox.s: no tickers"},
		"sandbox precondition not a bool": {`sandbox "s" {
  provider = provider.local
  lifecycle {
    precondition {
      condition     = "yes"
      error_message = "no"
    }
  }
}`, 5, "Invalid condition result", "must be true or false"},
		"sandbox postcondition": {`sandbox "s" {
  provider = provider.local
  lifecycle {
    postcondition {
      condition     = true
      error_message = "no"
    }
  }
}`, 4, "Sandbox postcondition not supported yet", "preconditions only"},
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

// TestRunConditionsAddDependencies: a run a condition reads is a
// dependency, and a precondition over a known value is decided.
func TestRunConditionsAddDependencies(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": lifecycleBase + `
run "r" {
  agent = agent.a
  input = "x"
  lifecycle {
    precondition {
      condition     = run.up.output != ""
      error_message = "up said nothing"
    }
  }
}`}, Options{})
	ri := c.RunInstances["run.r"]
	if strings.Join(ri.DependsOn, ",") != "run.up" {
		t.Fatalf("DependsOn = %v", ri.DependsOn)
	}
	diags, unknown := c.CheckRunConditions(ri, "precondition", RuntimeValues{}, cty.NilVal)
	if diags.HasErrors() || !unknown {
		t.Fatalf("before run.up: %s, unknown %v", diags.Error(), unknown)
	}
	diags, unknown = c.CheckRunConditions(ri, "precondition", RuntimeValues{RunOutputs: map[string]cty.Value{"run.up": cty.StringVal("")}}, cty.NilVal)
	if unknown || len(diags) != 1 || !strings.Contains(diags[0].Detail, "run.r: up said nothing") || diags[0].Subject.Start.Line != strings.Count(lifecycleBase, "\n")+7 {
		t.Fatalf("after run.up: %s, unknown %v", diags.Error(), unknown)
	}
}
