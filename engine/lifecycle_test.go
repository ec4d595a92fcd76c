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
	st, err := e.State.Read(context.Background())
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

// sandboxConditionSrc is a local sandbox with a postcondition COND and a
// run in it.
const sandboxConditionSrc = `
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
sandbox "s" {
  provider = provider.local
  lifecycle {
    postcondition {
      condition     = COND
      error_message = "the sandbox is not ready: ${self.status}"
    }
  }
}
agent "a" {
  provider = provider.scripted
  sandbox  = sandbox.s
}
run "r" {
  agent = agent.a
  input = "go"
}
`

// TestSandboxPostcondition: a sandbox whose postcondition fails on its
// attributes once created fails its apply at the condition, and its
// dependent run does not run; the sandbox is kept, and the next apply
// checks it again before the run uses it. Once the condition holds the
// run runs.
func TestSandboxPostcondition(t *testing.T) {
	bad := strings.Replace(sandboxConditionSrc, "COND", `self.status == "running" && length(self.urls) > 0`, 1)
	e, dir := newTestEngine(t, bad)
	for attempt := 1; attempt <= 2; attempt++ {
		err := applyErr(t, e, PlanOptions{})
		if err == nil || !strings.Contains(err.Error(), "Postcondition failed") || !strings.Contains(err.Error(), "sandbox.s: the sandbox is not ready: running") || !strings.Contains(err.Error(), "main.hcl:12,") {
			t.Fatalf("apply %d: %v", attempt, err)
		}
		st := readState(t, e)
		if r := st.Runs["run.r"]; r != nil && r.Status == RunCompleted {
			t.Fatalf("apply %d: run.r ran on a sandbox whose postcondition failed", attempt)
		}
		if ss := st.Sandboxes["sandbox.s"]; ss == nil || ss.Session.ID == "" {
			t.Fatalf("apply %d: the sandbox was not kept: %+v", attempt, ss)
		}
	}
	e = reloaded(t, e, dir, strings.Replace(sandboxConditionSrc, "COND", `self.status == "running" && self.id != "" && length(self.urls) == 0`, 1))
	if err := applyErr(t, e, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := readState(t, e).Runs["run.r"]; r.Status != RunCompleted {
		t.Fatalf("run.r = %s", r.Status)
	}
}
