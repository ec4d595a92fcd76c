package main

import (
	"os"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
)

// guardrailPipelineConfig is the 24-step pipeline with an input, a
// tool_input and an output guardrail, all of which let the run through.
func guardrailPipelineConfig() string {
	cfg := strings.Replace(pipelineConfig(), "  max_turns    = 30\n", "  max_turns    = 30\n  guardrails   = [guardrail.steps_only]\n", 1)
	cfg = strings.Replace(cfg, "  input = \"Run all the steps.\"\n", "  input = \"Run all the steps.\"\n  guardrails = [guardrail.polite, guardrail.no_keys]\n", 1)
	return cfg + `
guardrail "polite" {
  on        = "input"
  condition = length(guard.text) < 1000
  message   = "the input is too long"
}
guardrail "steps_only" {
  on        = "tool_input"
  condition = can(regex("^echo 'step", guard.arguments.cmd))
  message   = "only the steps may run"
}
guardrail "no_keys" {
  on        = "output"
  condition = !can(regex("(?i)api[_-]?key", guard.text))
  message   = "the answer must not mention API keys"
}
`
}

// TestCrashWithGuardrails kills agentctl (SIGKILL) during a tool call of
// a run with guardrails, then resumes it: no guardrail that already let
// something through is checked again, and each is checked once for what
// it guards (the input once, each call once, the output once).
func TestCrashWithGuardrails(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(h.dir+"/main.hcl", []byte(guardrailPipelineConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	p, hold := h.startHeld(t)
	p.kill(t)
	before := guardrailVerdicts(h.journal())
	if before["polite"] != 1 || before["steps_only"] != holdStep || before["no_keys"] != 0 {
		t.Fatalf("verdicts recorded before the kill during step %d: %v", holdStep, before)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	h.checkFinished()
	after := guardrailVerdicts(h.journal())
	if after["polite"] != 1 || after["steps_only"] != pipelineSteps || after["no_keys"] != 1 {
		t.Fatalf("verdicts after the resume: %v; want polite 1, steps_only %d (one a call), no_keys 1", after, pipelineSteps)
	}
	if st := h.readState(); st.Runs["run.job"].Status != "completed" {
		t.Fatalf("run.job is %q after the resume", st.Runs["run.job"].Status)
	}
}

// guardrailVerdicts counts the passing verdicts in steps by guardrail
// name; a tripped one fails the test.
func guardrailVerdicts(steps []agentloop.Step) map[string]int {
	n := map[string]int{}
	for _, s := range steps {
		if s.Kind == agentloop.StepGuardrail && s.Guardrail != nil && !s.Guardrail.Tripped {
			n[s.Guardrail.Name]++
		}
	}
	return n
}
