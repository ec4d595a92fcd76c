package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/state"
)

const continueConfig = `
provider "scripted" {
  script "triage" {
    reply {
      call "transfer_to_analyst" {}
    }
  }
  script "analyst" {
    reply { text = "first answer" }
  }
  script "analyst" {
    run = "followup"
    reply { text = "SECOND" }
  }
}
agent "triage" {
  provider = provider.scripted
  model    = "m"
  handoffs = [agent.analyst]
}
agent "analyst" {
  provider     = provider.scripted
  model        = "m"
  instructions = "Analyse."
}
run "first" {
  agent = agent.triage
  input = "INPUT1"
}
run "followup" {
  agent    = agent.analyst
  input    = "and then?"
  continue = run.first
}
`

// journalSteps reads a run's journal from the state.
func journalSteps(t *testing.T, e *Engine, st *state.State, addr string) []agentloop.Step {
	t.Helper()
	steps, err := e.readJournal(context.Background(), st.Runs[addr])
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

func planActions(t *testing.T, e *Engine) map[string]Action {
	t.Helper()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(context.Background(), st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Action{}
	for _, c := range p.Changes {
		out[c.Address] = c.Action
	}
	return out
}

func TestContinueStartsFromTranscript(t *testing.T) {
	e, dir := newTestEngine(t, continueConfig)
	st := planApply(t, e, PlanOptions{})
	first, follow := st.Runs["run.first"], st.Runs["run.followup"]
	if first.Status != RunCompleted || follow.Status != RunCompleted {
		t.Fatalf("statuses %s, %s", first.Status, follow.Status)
	}
	if string(follow.Output) != `"SECOND"` {
		t.Errorf("followup output %s: the run-scoped script was not used", follow.Output)
	}
	// run.first's transcript: its input, the handoff call and its output,
	// the analyst's answer.
	transcript, err := agentloop.Transcript(journalSteps(t, e, st, "run.first"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, it := range transcript {
		kinds = append(kinds, string(it.Type)+":"+it.Role+it.Name+it.Text)
	}
	want := []string{"message:userINPUT1", "function_call:transfer_to_analyst", "function_call_output:", "message:assistantfirst answer"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Fatalf("run.first transcript (-want +got):\n%s", diff)
	}
	// The followup starts from it, then its own input.
	steps := journalSteps(t, e, st, "run.followup")
	if steps[0].Kind != agentloop.StepInput || steps[0].Input != "and then?" {
		t.Fatalf("followup first step %+v", steps[0])
	}
	if diff := cmp.Diff(transcript, steps[0].Prior); diff != "" {
		t.Errorf("followup prior (-want +got):\n%s", diff)
	}
	got, err := agentloop.Transcript(steps)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(transcript)+2 || got[len(transcript)].Text != "and then?" || got[len(got)-1].Text != "SECOND" {
		t.Errorf("followup transcript %+v", got)
	}
	if follow.DigestInputs["run.first.transcript"] == "" {
		t.Errorf("digest inputs %v lack run.first.transcript", follow.DigestInputs)
	}

	// Nothing changed: both stay.
	if acts := planActions(t, e); acts["run.first"] != ActionNoop || acts["run.followup"] != ActionNoop {
		t.Fatalf("second plan %v", acts)
	}

	// Editing run.first's input re-runs both, the followup from the new
	// transcript.
	src := strings.Replace(continueConfig, "INPUT1", "INPUT2", 1)
	e2 := reload(t, e, dir, src)
	if acts := planActions(t, e2); acts["run.first"] != ActionRerun || acts["run.followup"] != ActionRerun {
		t.Fatalf("plan after editing run.first %v", acts)
	}
	st = planApply(t, e2, PlanOptions{})
	steps = journalSteps(t, e2, st, "run.followup")
	if st.Runs["run.followup"].Status != RunCompleted || steps[0].Prior[0].Text != "INPUT2" {
		t.Fatalf("followup after re-run: %s, prior %+v", st.Runs["run.followup"].Status, steps[0].Prior)
	}
	if st.Runs["run.followup"].Digest == follow.Digest {
		t.Error("the followup's digest did not change with the transcript it continues")
	}

	// Changing only the followup's scoped script re-runs the followup alone.
	src = strings.Replace(src, "SECOND", "THIRD", 1)
	e3 := reload(t, e2, dir, src)
	if acts := planActions(t, e3); acts["run.first"] != ActionNoop || acts["run.followup"] != ActionRerun {
		t.Fatalf("plan after editing the scoped script %v", acts)
	}
}

// reload loads src into dir with e's state directory.
func reload(t *testing.T, e *Engine, dir, src string) *Engine {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ne, _ := newTestEngine(t, src)
	ne.State = e.State
	return ne
}

func TestContinueWaitsForFailedRun(t *testing.T) {
	// run.first's analyst has no reply: run.first fails, and the
	// followup does not execute.
	src := strings.Replace(continueConfig, `  script "analyst" {
    reply { text = "first answer" }
  }
`, "", 1)
	e, _ := newTestEngine(t, src)
	ctx := context.Background()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Apply(ctx, st, p)
	if err == nil {
		t.Fatal("apply succeeded with a failing run")
	}
	if st.Runs["run.first"].Status != RunFailed {
		t.Fatalf("run.first %s", st.Runs["run.first"].Status)
	}
	if r := st.Runs["run.followup"]; r != nil && r.Status != RunPending {
		t.Fatalf("followup ran: %+v", r)
	}
	// Planned alone, the followup says why it can't start.
	st, _ = e.State.Read(context.Background())
	_, err = e.continuedTranscript(ctx, st, e.Config.RunInstances["run.followup"], map[string]string{})
	if err == nil || !strings.Contains(err.Error(), "run.first, whose conversation it continues, has not completed") {
		t.Fatalf("err = %v", err)
	}
}

func TestContinueForEachInstances(t *testing.T) {
	e, _ := newTestEngine(t, `
provider "scripted" {
  script "a" {
    reply { text = "noted" }
  }
}
agent "a" {
  provider = provider.scripted
  model    = "m"
}
run "many" {
  for_each = toset(["x", "y"])
  agent    = agent.a
  input    = "topic ${each.key}"
}
run "next" {
  for_each = toset(["x", "y"])
  agent    = agent.a
  input    = "more on ${each.key}"
  continue = run.many[each.key]
}
`)
	st := planApply(t, e, PlanOptions{})
	for _, k := range []string{"x", "y"} {
		addr := `run.next["` + k + `"]`
		steps := journalSteps(t, e, st, addr)
		if len(steps[0].Prior) != 2 || steps[0].Prior[0].Text != "topic "+k || steps[0].Input != "more on "+k {
			t.Errorf("%s starts from %+v, input %q", addr, steps[0].Prior, steps[0].Input)
		}
		if st.Runs[addr].DigestInputs[`run.many["`+k+`"].transcript`] == "" {
			t.Errorf("%s digest inputs %v", addr, st.Runs[addr].DigestInputs)
		}
	}
}
