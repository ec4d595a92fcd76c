package engine

import (
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
)

// guardrailConfig is a run whose agent makes one tool call (note, with
// argument n = N) and then answers ANSWER, on INPUT, with an input, an
// output, a tool_input and a tool_output guardrail.
const guardrailConfig = `
provider "scripted" {
  script "a" {
    reply {
      call "note" {
        arguments = { n = N }
      }
    }
    reply { text = "ANSWER" }
  }
}
guardrail "no_password" {
  on        = "input"
  condition = !can(regex("(?i)password", guard.text))
  message   = "the input must not carry a password"
}
guardrail "no_keys" {
  on        = "output"
  condition = !can(regex("(?i)api[_-]?key", guard.text))
  message   = "the answer must not mention API keys"
}
guardrail "small_n" {
  on        = "tool_input"
  condition = guard.tool != "note" || guard.arguments.n < 2
}
guardrail "short_output" {
  on        = "tool_output"
  condition = length(guard.text) < 10000
}
agent "a" {
  provider   = provider.scripted
  guardrails = [guardrail.no_keys, guardrail.small_n, guardrail.short_output]
}
run "r" {
  agent      = agent.a
  input      = "INPUT"
  guardrails = [guardrail.no_password]
  max_turns  = TURNS
}
`

func guardrailSrc(input string, n int, answer string, turns int) string {
	r := strings.NewReplacer("INPUT", input, "N", string(rune('0'+n)), "ANSWER", answer, "TURNS", string(rune('0'+turns)))
	return r.Replace(guardrailConfig)
}

// guardSteps counts the run's checkpointed guardrail verdicts by
// guardrail name and tool steps.
func guardSteps(t *testing.T, e *Engine) (verdicts map[string]int, tools, models int) {
	t.Helper()
	verdicts = map[string]int{}
	for _, s := range journalSteps(t, e, readState(t, e), "run.r") {
		switch s.Kind {
		case agentloop.StepGuardrail:
			verdicts[s.Guardrail.Name]++
		case agentloop.StepTool:
			tools++
		case agentloop.StepModel:
			models++
		}
	}
	return verdicts, tools, models
}

// A tripped input guardrail stops the run before its first model call:
// no turn, no tool call, status guardrail_tripped with the guardrail's
// name and message.
func TestGuardrailInputTrips(t *testing.T) {
	e, _ := newTestEngine(t, guardrailSrc("my password is hunter2", 1, "fine", 5))
	err := applyErr(t, e, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), `guardrail "no_password" tripped on the run's input (agent "a"): the input must not carry a password`) {
		t.Fatalf("apply: %v", err)
	}
	r := readState(t, e).Runs["run.r"]
	if r.Status != RunGuardrailTripped || r.Guardrail == nil || r.Guardrail.Name != "no_password" || r.Guardrail.On != "input" || r.Turns != 0 || r.ToolCalls != 0 || len(r.Output) != 0 {
		t.Fatalf("run.r = %+v, guardrail %+v", r, r.Guardrail)
	}
	if v, tools, models := guardSteps(t, e); v["no_password"] != 1 || tools != 0 || models != 0 {
		t.Fatalf("journal: verdicts %v, %d tool steps, %d model steps", v, tools, models)
	}
}

// A tripped output guardrail leaves the run guardrail_tripped with no
// output recorded.
func TestGuardrailOutputTrips(t *testing.T) {
	e, _ := newTestEngine(t, guardrailSrc("hello", 1, "the api_key is 123", 5))
	err := applyErr(t, e, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), `guardrail "no_keys" tripped on the run's output`) {
		t.Fatalf("apply: %v", err)
	}
	r := readState(t, e).Runs["run.r"]
	if r.Status != RunGuardrailTripped || r.Guardrail == nil || r.Guardrail.Name != "no_keys" || r.Guardrail.Message != "the answer must not mention API keys" || len(r.Output) != 0 || r.Turns != 2 {
		t.Fatalf("run.r = %+v, guardrail %+v", r, r.Guardrail)
	}
	st, p := plan(t, e, PlanOptions{})
	_ = st
	if c := p.Change("run.r"); c.Action != ActionResume || !strings.Contains(strings.Join(c.Reasons, "; "), "stopped by a guardrail at turn 2") {
		t.Fatalf("plan: %s %q", c.Action, c.Reasons)
	}
}

// A tripped tool_input guardrail stops the call before it runs: no tool
// output is recorded and the model is not asked again.
func TestGuardrailToolInputTrips(t *testing.T) {
	e, _ := newTestEngine(t, guardrailSrc("hello", 2, "fine", 5))
	err := applyErr(t, e, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), `guardrail "small_n" tripped on the arguments of a call of note (agent "a"): guardrail "small_n" tripped`) {
		t.Fatalf("apply: %v", err)
	}
	r := readState(t, e).Runs["run.r"]
	if r.Status != RunGuardrailTripped || r.Guardrail.Tool != "note" || r.ToolCalls != 0 || r.Turns != 1 {
		t.Fatalf("run.r = %+v, guardrail %+v", r, r.Guardrail)
	}
	if v, tools, _ := guardSteps(t, e); tools != 0 || v["small_n"] != 1 || v["short_output"] != 0 {
		t.Fatalf("journal: verdicts %v, %d tool steps", v, tools)
	}
}

// A resumed run does not check again what a guardrail let through: its
// verdicts are checkpointed. Changing a guardrail changes the run's
// digest, so the run is re-run, and its plan says which guardrail
// changed.
func TestGuardrailResumeDoesNotRecheck(t *testing.T) {
	e, dir := newTestEngine(t, guardrailSrc("hello", 1, "fine", 1))
	if err := applyErr(t, e, PlanOptions{}); err == nil || !strings.Contains(err.Error(), "max turns") {
		t.Fatalf("apply: %v", err)
	}
	if v, tools, _ := guardSteps(t, e); v["no_password"] != 1 || v["small_n"] != 1 || v["short_output"] != 1 || tools != 1 {
		t.Fatalf("first attempt: verdicts %v, %d tool steps", v, tools)
	}
	e = reloaded(t, e, dir, guardrailSrc("hello", 1, "fine", 5))
	if err := applyErr(t, e, PlanOptions{}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if r := readState(t, e).Runs["run.r"]; r.Status != RunCompleted || string(r.Output) != `"fine"` {
		t.Fatalf("run.r = %+v", r)
	}
	if v, tools, _ := guardSteps(t, e); v["no_password"] != 1 || v["small_n"] != 1 || v["short_output"] != 1 || v["no_keys"] != 1 || tools != 1 {
		t.Fatalf("after resume: verdicts %v, %d tool steps", v, tools)
	}
	e = reloaded(t, e, dir, strings.Replace(guardrailSrc("hello", 1, "fine", 5), "the answer must not mention API keys", "no API keys", 1))
	_, p := plan(t, e, PlanOptions{})
	c := p.Change("run.r")
	if c.Action != ActionRerun || !strings.Contains(strings.Join(c.Reasons, "; "), "guardrail.no_keys") || c.Attributes["guardrail.no_keys.message"] != "no API keys" ||
		c.Attributes["guardrail.small_n"] != `tool_input: guard.tool != "note" || guard.arguments.n < 2` {
		t.Fatalf("plan after a guardrail changed: %s %q %v", c.Action, c.Reasons, c.Attributes)
	}
}

// judgeConfig is a run with an input agent guardrail judged by a
// scripted agent answering VERDICT; PARALLEL sets parallel.
const judgeConfig = `
provider "scripted" {
  script "a" {
    reply { text = "answer" }
  }
  script "judge" {
    reply { text = VERDICT }
  }
}
agent "a" {
  provider   = provider.scripted
  guardrails = [guardrail.on_topic]
}
agent "judge" {
  provider      = provider.scripted
  output_schema = {
    type       = "object"
    properties = { tripwire = { type = "boolean" }, reason = { type = "string" } }
    required   = ["tripwire", "reason"]
  }
}
guardrail "on_topic" {
  on       = "input"
  agent    = agent.judge
  parallel = PARALLEL
}
run "r" {
  agent = agent.a
  input = "tell me a joke"
}
`

// An agent guardrail's judge is a model call of the run (its usage
// counted), and its tripwire stops the run with its reason; a judge
// whose answer is not a verdict fails the run closed, naming the
// guardrail and where it is declared.
func TestGuardrailAgentJudge(t *testing.T) {
	for _, tc := range []struct {
		verdict, parallel string
		status, errText   string
		models            int
	}{
		{`jsonencode({ tripwire = true, reason = "off topic" })`, "false", RunGuardrailTripped, `guardrail "on_topic" tripped on the run's input (agent "a"): off topic`, 1},
		{`jsonencode({ tripwire = true, reason = "off topic" })`, "true", RunGuardrailTripped, `guardrail "on_topic" tripped on the run's input (agent "a"): off topic`, 2},
		{`jsonencode({ tripwire = false, reason = "fine" })`, "true", RunCompleted, "", 2},
		{`"not json"`, "false", RunFailed, `guardrail "on_topic" (`, 1},
	} {
		src := strings.NewReplacer("VERDICT", tc.verdict, "PARALLEL", tc.parallel).Replace(judgeConfig)
		e, _ := newTestEngine(t, src)
		err := applyErr(t, e, PlanOptions{})
		r := readState(t, e).Runs["run.r"]
		if r.Status != tc.status || (tc.errText == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.errText) {
			t.Errorf("%s parallel=%s: status %s, apply %v", tc.verdict, tc.parallel, r.Status, err)
			continue
		}
		models := 0
		for _, s := range journalSteps(t, e, readState(t, e), "run.r") {
			if s.Kind == agentloop.StepModel {
				models++
			}
		}
		if models != tc.models || r.Usage.InputTokens == 0 {
			t.Errorf("%s parallel=%s: %d model calls (want %d), usage %+v", tc.verdict, tc.parallel, models, tc.models, r.Usage)
		}
		if tc.status == RunFailed && !strings.Contains(err.Error(), "main.hcl:22) could not decide") {
			t.Errorf("judge error not located: %v", err)
		}
	}
}
