package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
)

const budgetConfig = `
provider "scripted" {
  script "a" {
    reply {
      call "transfer_to_b" {
        arguments = {}
      }
    }
  }
  script "b" {
    reply {
      call "note" {
        arguments = { n = 1 }
      }
      call "note" {
        arguments = { n = 2 }
      }
    }
    reply { text = "done by b" }
  }
}
agent "a" {
  provider = provider.scripted
  handoffs = [agent.b]
}
agent "b" {
  provider = provider.scripted
  budget {
    max_tool_calls = 1
  }
}
run "r" {
  agent = agent.a
  input = "go"
  budget {
    max_tokens = 100000
  }
}
`

// An agent's budget counts its own calls within the run (the handoff is
// agent a's); the run fails with the figure, its journal kept, and resumes
// from its checkpoint once the budget is raised, without a re-run: budgets
// are not in the digest.
func TestBudgetFailsAndResumesWhenRaised(t *testing.T) {
	e, dir := newTestEngine(t, budgetConfig)
	err := applyErr(t, e, PlanOptions{})
	if !errors.Is(err, agentloop.ErrBudget) || !strings.Contains(err.Error(), `run.r: budget exceeded: agent "b" used 1 tool calls of its max_tool_calls = 1, and the model asked for 1 more`) {
		t.Fatalf("apply: %v", err)
	}
	st := readState(t, e)
	r := st.Runs["run.r"]
	if r.Status != RunFailed || r.ToolCalls != 2 || r.Budgets["agent.b"].MaxToolCalls != 1 || r.Budgets["run"].MaxTokens != 100000 || r.Usage.InputTokens == 0 {
		t.Fatalf("run.r = %+v", r)
	}
	digest := r.Digest

	e = reloaded(t, e, dir, strings.Replace(budgetConfig, "max_tool_calls = 1", "max_tool_calls = 5", 1))
	_, p := plan(t, e, PlanOptions{})
	c := p.Change("run.r")
	if c.Action != ActionResume || len(c.Reasons) != 2 || c.Reasons[1] != "agent.b's budget changed: (max_tool_calls = 1) → (max_tool_calls = 5)" {
		t.Fatalf("plan: %s %q", c.Action, c.Reasons)
	}
	if c.Attributes["agent.b.budget"] != "(max_tool_calls = 5)" || c.Attributes["budget"] != "(max_tokens = 100,000)" {
		t.Fatalf("plan attributes: %v", c.Attributes)
	}
	if err := applyErr(t, e, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	r = readState(t, e).Runs["run.r"]
	if r.Status != RunCompleted || string(r.Output) != `"done by b"` || r.Digest != digest || r.ToolCalls != 3 || r.Turns != 3 {
		t.Fatalf("resumed run = %+v", r)
	}
	steps := journalSteps(t, e, readState(t, e), "run.r")
	notes := 0
	for _, s := range steps {
		if s.Kind == agentloop.StepTool && s.Agent == "b" {
			notes++
		}
		if s.Kind != agentloop.StepInput && s.Elapsed == 0 {
			t.Errorf("step %+v records no running time", s)
		}
	}
	if notes != 2 {
		t.Errorf("agent b answered %d calls over both attempts, want 2 (none repeated)", notes)
	}

	// A completed run is left alone when its budget changes.
	e = reloaded(t, e, dir, strings.Replace(budgetConfig, "max_tokens = 100000", "max_tokens = 5", 1))
	_, p = plan(t, e, PlanOptions{})
	if c := p.Change("run.r"); c.Action != ActionNoop {
		t.Fatalf("plan after a budget change of a completed run: %s %q", c.Action, c.Reasons)
	}
}
