package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/state"
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

// A run recorded before journal names carried the state's lineage is
// resumed from the journal its record names, and goes on in it; a run
// started now gets a journal named for the lineage.
func TestResumeJournalNamedBeforeLineage(t *testing.T) {
	e, dir := newTestEngine(t, budgetConfig)
	if err := applyErr(t, e, PlanOptions{}); !errors.Is(err, agentloop.ErrBudget) {
		t.Fatalf("apply: %v", err)
	}
	st := readState(t, e)
	r := st.Runs["run.r"]
	if want := state.ScopedJournalName(st.Lineage, "run.r"); r.Journal != want {
		t.Fatalf("journal %q, want %q", r.Journal, want)
	}
	old := state.JournalName("run.r")
	if err := os.Rename(e.State.Abs(r.Journal), e.State.Abs(old)); err != nil {
		t.Fatal(err)
	}
	r.Journal = old
	if err := e.State.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}

	e = reloaded(t, e, dir, strings.Replace(budgetConfig, "max_tool_calls = 1", "max_tool_calls = 5", 1))
	if err := applyErr(t, e, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	st = readState(t, e)
	r = st.Runs["run.r"]
	if r.Status != RunCompleted || r.Journal != old || r.ToolCalls != 3 {
		t.Fatalf("resumed run = %+v", r)
	}
	notes := 0
	for _, s := range journalSteps(t, e, st, "run.r") {
		if s.Kind == agentloop.StepTool && s.Agent == "b" {
			notes++
		}
	}
	if notes != 2 {
		t.Errorf("agent b answered %d calls over both attempts, want 2 (none repeated)", notes)
	}
	if _, err := os.Stat(e.State.Abs(state.ScopedJournalName(st.Lineage, "run.r"))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a second journal was started for the resumed run: %v", err)
	}

	// Run again from the start: the old journal goes with the record it
	// belonged to, the new one is named for the lineage.
	if err := applyErr(t, e, PlanOptions{Replace: []string{"run.r"}}); err != nil {
		t.Fatal(err)
	}
	r = readState(t, e).Runs["run.r"]
	if r.Journal != state.ScopedJournalName(st.Lineage, "run.r") {
		t.Errorf("re-run journal %q", r.Journal)
	}
	if _, err := os.Stat(e.State.Abs(old)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the replaced record's journal %s is still there: %v", old, err)
	}
}
