package config

import (
	"fmt"
	"strings"
	"testing"
)

const guardrailBase = `
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
variable "pattern" { default = "(?i)api[_-]?key" }
agent "a" {
  provider   = provider.scripted
  guardrails = [guardrail.no_keys]
}
agent "judge" {
  provider      = provider.scripted
  output_schema = {
    type       = "object"
    properties = { tripwire = { type = "boolean" }, reason = { type = "string" } }
    required   = ["tripwire", "reason"]
  }
}
guardrail "no_keys" {
  on        = "output"
  condition = !can(regex(var.pattern, guard.text))
  message   = "the answer must not mention API keys"
}
`

// TestGuardrailDecoded: guardrail blocks, and their attachment to agents
// and runs, decode; a condition is evaluated over the guard object.
func TestGuardrailDecoded(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": guardrailBase + `
guardrail "no_rm" {
  on        = "tool_input"
  condition = !can(regex("rm -rf", try(guard.arguments.cmd, ""))) && length(guard.text) < 1000
}
guardrail "topic" {
  on       = "input"
  agent    = agent.judge
  parallel = true
}
run "r" {
  agent      = agent.a
  input      = "hi"
  guardrails = [guardrail.no_rm, guardrail.topic]
}
`}, Options{})
	if got := c.Agents["a"].Guardrails; len(got) != 1 || got[0] != "no_keys" {
		t.Errorf("agent guardrails %q", got)
	}
	if got := c.RunInstances["run.r"].Guardrails; len(got) != 2 || got[1] != "topic" {
		t.Errorf("run guardrails %q", got)
	}
	topic := c.Guardrails["topic"]
	if topic.Agent != "judge" || !topic.Parallel || topic.On != GuardInput {
		t.Errorf("topic %+v", topic)
	}
	for _, tc := range []struct {
		name string
		g    Guarded
		want bool
	}{
		{"no_keys", Guarded{Text: "the answer"}, true},
		{"no_keys", Guarded{Text: "my API_KEY is"}, false},
		{"no_rm", Guarded{Tool: "exec_command", Arguments: `{"cmd":"ls"}`}, true},
		{"no_rm", Guarded{Tool: "exec_command", Arguments: `{"cmd":"rm -rf /"}`}, false},
	} {
		got, err := c.Guardrails[tc.name].Condition.Passes(tc.g)
		if err != nil || got != tc.want {
			t.Errorf("%s(%+v) = %v, %v; want %v", tc.name, tc.g, got, err, tc.want)
		}
	}
	if c.Guardrails["no_rm"].Message != `guardrail "no_rm" tripped` {
		t.Errorf("default message %q", c.Guardrails["no_rm"].Message)
	}
}

// TestGuardrailRuntimeError: a condition that fails to evaluate (a
// regular expression from the call's arguments that does not compile,
// text that is not JSON) is an error naming the condition's file and
// line, never a pass.
func TestGuardrailRuntimeError(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": guardrailBase + `
guardrail "bad" {
  on        = "tool_input"
  condition = length(regexall(guard.arguments.pattern, guard.text)) == 0 && jsondecode(guard.text) != null
}
`}, Options{})
	at := fmt.Sprintf("main.hcl:%d", strings.Count(guardrailBase, "\n")+4)
	for _, tc := range []struct{ args, want string }{
		{`{"pattern":"(unclosed"}`, "missing closing )"},
		{`{"pattern":"x"}`, "invalid character"},
	} {
		ok, err := c.Guardrails["bad"].Condition.Passes(Guarded{Text: "not json", Arguments: tc.args})
		if ok || err == nil || !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Passes(%s) = %v, %v; want an error at %s with %q", tc.args, ok, err, at, tc.want)
		}
	}
}

// TestGuardrailDiagnostics: every guardrail attribute is checked where it
// is written.
func TestGuardrailDiagnostics(t *testing.T) {
	for name, tc := range map[string]struct {
		hcl     string
		line    int // in the added text, 1 = its first line
		summary string
		detail  string
	}{
		"missing on": {`guardrail "g" {
  condition = true
}`, 1, "Missing required argument", `"on" is required`},
		"bad on": {`guardrail "g" {
  on        = "outptu"
  condition = true
}`, 2, "Invalid on", `Did you mean "output"?`},
		"no check": {`guardrail "g" {
  on = "input"
}`, 1, "Missing guardrail check", "condition = EXPRESSION"},
		"both checks": {`guardrail "g" {
  on        = "input"
  condition = true
  agent     = agent.judge
}`, 4, "Conflicting guardrail checks", "keep one"},
		"unknown guard attribute": {`guardrail "g" {
  on        = "input"
  condition = length(guard.txt) < 10
}`, 3, `Invalid "guard" attribute`, `Did you mean "text"?`},
		"tool attribute on input": {`guardrail "g" {
  on        = "input"
  condition = guard.tool != "x"
}`, 3, `Invalid "guard" attribute`, "only for tool guardrails"},
		"other reference": {`guardrail "g" {
  on        = "output"
  condition = run.r.output != ""
}`, 3, "Invalid reference in condition", `"run" is none of them`},
		"bad literal regex": {`guardrail "g" {
  on        = "output"
  condition = !can(regex("(unclosed", guard.text))
}`, 3, "Invalid regular expression", "missing closing )"},
		"parallel on expression": {`guardrail "g" {
  on        = "input"
  condition = true
  parallel  = true
}`, 4, "Invalid parallel", "needs on = \"input\" and agent"},
		"parallel on output": {`guardrail "g" {
  on       = "output"
  agent    = agent.judge
  parallel = true
}`, 4, "Invalid parallel", "beside the first model call"},
		"undeclared judge": {`guardrail "g" {
  on    = "input"
  agent = agent.jduge
}`, 3, "Reference to undeclared agent", `Did you mean "judge"?`},
		"judge without schema": {`guardrail "g" {
  on    = "input"
  agent = agent.a
}`, 1, "Invalid guardrail agent", "it has none"},
		"bad regex from a variable": {`variable "re" { default = "(x" }
guardrail "g" {
  on        = "output"
  condition = length(regexall(var.re, guard.text)) == 0
}`, 4, "Invalid function argument", "missing closing )"},
		"unknown function": {`guardrail "g" {
  on        = "output"
  condition = strcontains(guard.text, "x")
}`, 3, "Call to unknown function", "strcontains"},
		"not a bool": {`guardrail "g" {
  on        = "output"
  condition = "yes"
}`, 3, "Invalid condition", "got string"},
		"message type": {`guardrail "g" {
  on        = "input"
  condition = true
  message   = ["x"]
}`, 4, "Incorrect attribute value type", "message"},
		"undeclared guardrail": {`run "r" {
  agent      = agent.a
  input      = "x"
  guardrails = [guardrail.no_key]
}`, 4, "Reference to undeclared guardrail", `Did you mean "no_keys"?`},
		"duplicate guardrail": {`run "r" {
  agent      = agent.a
  input      = "x"
  guardrails = [guardrail.no_keys, guardrail.no_keys]
}`, 4, "Duplicate guardrail", "listed twice"},
		"not a guardrail": {`run "r" {
  agent      = agent.a
  input      = "x"
  guardrails = ["no_keys"]
}`, 4, "Invalid reference", "guardrail.NAME"},
	} {
		t.Run(name, func(t *testing.T) {
			src := guardrailBase + tc.hcl + "\n"
			_, diags := load(t, map[string]string{"main.hcl": src}, Options{})
			wantLine := strings.Count(guardrailBase, "\n") + tc.line
			for _, d := range diags {
				if d.Summary == tc.summary && strings.Contains(d.Detail, tc.detail) && d.Subject != nil && d.Subject.Start.Line == wantLine {
					return
				}
			}
			t.Errorf("want %q (%q) at line %d; got %s", tc.summary, tc.detail, wantLine, diags.Error())
		})
	}
}
