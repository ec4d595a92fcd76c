package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/fakeopenai"
)

// TestProvenanceNamesFallbackModel: the run's provenance lists the
// model_fallback model that answered when the agent's own was
// unavailable, beside the agent's own.
func TestProvenanceNamesFallbackModel(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		if r.JSON["model"] == "gpt-main" {
			return fakeopenai.Status(503)
		}
		return fakeopenai.Text("answered")
	}))
	e, _ := newTestEngine(t, fmt.Sprintf(`
provider "openai" {
  base_url    = %q
  max_retries = 0
}
agent "a" {
  model          = "gpt-main"
  model_fallback = ["gpt-backup", "gpt-unused"]
}
run "r" {
  agent = agent.a
  input = "hi"
}
`, srv.URL))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	r := planApply(t, e, PlanOptions{}).Runs["run.r"]
	if r.Status != RunCompleted {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	if got := r.Provenance.Models; !slices.Equal(got, []string{"gpt-backup", "gpt-main"}) {
		t.Fatalf("provenance models %q, want the fallback that answered beside the agent's own", got)
	}
}

// TestPlanShowsConditionsAndHooks: a run's plan lists its conditions and
// the hooks of the run and its agents.
func TestPlanShowsConditionsAndHooks(t *testing.T) {
	e, _ := newTestEngine(t, `
provider "scripted" {
  script "a" {
    reply { text = "{}" }
  }
}
agent "a" {
  provider = provider.scripted
  hook "tool_start" {
    command = ["./audit.sh", "--strict"]
    timeout = "5s"
  }
}
run "r" {
  agent = agent.a
  input = "go"
  hook "run_end" { command = ["./notify.sh"] }
  lifecycle {
    precondition {
      condition     = length("x") > 0
      error_message = "never"
    }
    postcondition {
      condition     = can(jsondecode(self.output))
      error_message = "not JSON"
    }
  }
}
`)
	_, p := plan(t, e, PlanOptions{})
	c := p.Change("run.r")
	for k, want := range map[string]string{
		"precondition.0":  `length("x") > 0`,
		"postcondition.0": `can(jsondecode(self.output))`,
		"hook.tool_start": `agent.a ["./audit.sh","--strict"] (timeout 5s)`,
		"hook.run_end":    `run ["./notify.sh"] (timeout 10s)`,
	} {
		if got := c.Attributes[k]; got != want {
			t.Errorf("%s = %q, want %q (attributes %s)", k, got, want, strings.Join(slices.Sorted(maps.Keys(c.Attributes)), ", "))
		}
	}
}
