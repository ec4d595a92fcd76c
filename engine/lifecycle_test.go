package engine

import (
	"context"
	"strings"
	"testing"
)

const conditionsConfig = `
variable "tickers" { default = ["ACME"] }
provider "scripted" {
  script "a" {
    reply { text = "not json" }
  }
  script "b" {
    reply { text = "used the report" }
  }
}
agent "a" {
  provider = provider.scripted
}
agent "b" {
  provider = provider.scripted
}
run "report" {
  agent = agent.a
  input = "go"
  lifecycle {
    precondition {
      condition     = length(var.tickers) > 0
      error_message = "no tickers"
    }
    postcondition {
      condition     = can(jsondecode(self.output)) && self.status == "completed" && self.usage.total_tokens > 0
      error_message = "output is not JSON"
    }
  }
}
run "use" {
  agent = agent.b
  input = "use ${run.report.output}"
}
`

// TestPreconditionFailsAtPlan: a precondition over values known at plan
// fails the plan, at the condition, with its message.
func TestPreconditionFailsAtPlan(t *testing.T) {
	e, _ := newTestEngine(t, strings.Replace(conditionsConfig, `default = ["ACME"]`, `default = []`, 1))
	st, err := e.State.Read()
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Plan(context.Background(), st, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "main.hcl:22,23-46: Precondition failed; run.report: no tickers") {
		t.Fatalf("plan: %v", err)
	}
}

// TestPreconditionOverUpstreamCheckedAtApply: a precondition over an
// upstream output is decided when apply reaches the run; its failure
// stops the run before its model is called.
func TestPreconditionOverUpstreamCheckedAtApply(t *testing.T) {
	src := strings.Replace(conditionsConfig, `  input = "use ${run.report.output}"`, `  input = "use"
  lifecycle {
    precondition {
      condition     = run.first.output == "yes"
      error_message = "first did not say yes"
    }
  }`, 1)
	src = strings.Replace(src, `script "a" {`, `script "f" {
    reply { text = "no" }
  }
  script "a" {`, 1) + `
agent "f" {
  provider = provider.scripted
}
run "first" {
  agent = agent.f
  input = "go"
}
`
	src = strings.Replace(src, "can(jsondecode(self.output)) &&", "", 1)
	e, _ := newTestEngine(t, src)
	_, p := plan(t, e, PlanOptions{})
	if c := p.Change("run.use"); c == nil || c.Action != ActionExecute {
		t.Fatalf("plan: %+v", c)
	}
	err := applyErr(t, e, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "run.use: ") || !strings.Contains(err.Error(), "Precondition failed; run.use: first did not say yes") {
		t.Fatalf("apply: %v", err)
	}
	if r := readState(t, e).Runs["run.use"]; r != nil {
		t.Fatalf("run.use ran: %+v", r)
	}
}

// TestPostconditionFailsRunAndSkipsDependent: a failed postcondition
// fails the run, located and with its message, its output unrecorded and
// its dependent not run; once the postcondition is fixed the next apply
// re-checks it from the journal without calling the model again.
func TestPostconditionFailsRunAndSkipsDependent(t *testing.T) {
	e, dir := newTestEngine(t, conditionsConfig)
	err := applyErr(t, e, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "Postcondition failed; run.report: output is not JSON") {
		t.Fatalf("apply: %v", err)
	}
	st := readState(t, e)
	r := st.Runs["run.report"]
	if r.Status != RunFailed || !strings.Contains(r.Error, "main.hcl:26,23") || !strings.Contains(r.Error, "output is not JSON") || len(r.Output) != 0 {
		t.Fatalf("run.report = %+v", r)
	}
	if st.Runs["run.use"] != nil {
		t.Fatalf("the dependent ran: %+v", st.Runs["run.use"])
	}
	// The script has one reply: a second model call would fail the run.
	e = reloaded(t, e, dir, strings.Replace(conditionsConfig, "can(jsondecode(self.output))", `self.output == "not json"`, 1))
	if err := applyErr(t, e, PlanOptions{}); err != nil {
		t.Fatalf("apply after fixing the postcondition: %v", err)
	}
	st = readState(t, e)
	if r := st.Runs["run.report"]; r.Status != RunCompleted || string(r.Output) != `"not json"` || r.Turns != 1 {
		t.Fatalf("run.report = %+v", r)
	}
	if r := st.Runs["run.use"]; r == nil || r.Status != RunCompleted {
		t.Fatalf("run.use = %+v", r)
	}
}
