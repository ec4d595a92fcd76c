package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/fakeopenai"
)

// The attacks in this file are a hostile model's against tool
// guardrails: it chooses its own call ids and sends raw argument JSON
// through the openai provider to the in-process fake of the Responses
// API.

// guardedEngine is an engine whose run.r has agent.a (openai, at srv)
// with a shell capability in a local sandbox, guarded by a tool_input
// guardrail allowing only `echo` commands and a tool_output guardrail
// refusing outputs that mention SECRET.
func guardedEngine(t *testing.T, srv *fakeopenai.Server) (*Engine, string) {
	t.Helper()
	e, dir := newTestEngine(t, fmt.Sprintf(`
provider "openai" {
  base_url    = %q
  max_retries = 0
}
provider "local" { isolation = "none" }
sandbox "s" { provider = provider.local }
capability "shell" "sh" {}
guardrail "only_echo" {
  on        = "tool_input"
  condition = guard.tool != "exec_command" || (can(regex("^echo ", guard.arguments.cmd)) && !can(regex("PWNED", guard.text)))
  message   = "only echo may run"
}
guardrail "no_secret" {
  on        = "tool_output"
  condition = !can(regex("SECRET", guard.text))
  message   = "tool output must not carry secrets"
}
agent "a" {
  model        = "gpt-test"
  sandbox      = sandbox.s
  capabilities = [capability.shell.sh]
  guardrails   = [guardrail.only_echo, guardrail.no_secret]
}
run "r" {
  agent = agent.a
  input = "tidy up"
}
`, srv.URL))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	return e, dir
}

// guardVerdicts are run.r's checkpointed guardrail verdicts.
func guardVerdicts(t *testing.T, e *Engine) []agentloop.GuardrailVerdict {
	t.Helper()
	var out []agentloop.GuardrailVerdict
	for _, s := range journalSteps(t, e, readState(t, e), "run.r") {
		if s.Kind == agentloop.StepGuardrail {
			out = append(out, *s.Guardrail)
		}
	}
	return out
}

// TestHostileCallTripsToolInputGuardrail: a call the tool_input guardrail
// refuses never runs, whatever call id the model picks and however it
// spells the arguments (escapes, spacing); the run stops as
// guardrail_tripped with the guardrail's name and the model is not asked
// again.
func TestHostileCallTripsToolInputGuardrail(t *testing.T) {
	for _, tc := range []struct{ name, callID, args string }{
		{"plain", "call_9fZ", `{"cmd":"touch PWNED"}`},
		{"escaped letters", "call-\u00e9\u4e2d", `{"cmd":"echo x; touch \u0050WNED"}`},
		{"spacing and id with separators", "a\u0000b/../c", ` { "cmd" :  "touch PWNED" } `},
		{"nested object", "X", `{"cmd":"rm -rf .","env":{"A":"B"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t)
			srv.Enqueue(
				fakeopenai.Calls(fakeopenai.FunctionCall(tc.callID, "exec_command", tc.args)),
				fakeopenai.Text("done"),
			)
			e, dir := guardedEngine(t, srv)
			err := applyErr(t, e, PlanOptions{})
			if err == nil || !strings.Contains(err.Error(), `guardrail "only_echo" tripped on the arguments of a call of exec_command (agent "a"): only echo may run`) {
				t.Fatalf("apply: %v", err)
			}
			if found(t, dir, "PWNED") {
				t.Fatal("PWNED was written: the guarded call ran")
			}
			r := readState(t, e).Runs["run.r"]
			if r.Status != RunGuardrailTripped || r.Guardrail == nil || r.Guardrail.Name != "only_echo" || r.Guardrail.Tool != "exec_command" || r.ToolCalls != 0 {
				t.Fatalf("run.r = %s, guardrail %+v, %d tool calls", r.Status, r.Guardrail, r.ToolCalls)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d model requests, want 1 (the model is not asked again)", n)
			}
			vs := guardVerdicts(t, e)
			if len(vs) != 1 || !vs[0].Tripped || vs[0].CallID != tc.callID {
				t.Errorf("verdicts %+v, want one trip for call %q", vs, tc.callID)
			}
		})
	}
}

// TestHostileArgumentsNeverReachToolGuardrail: arguments a case-sensitive
// reader (the guardrail) and a case-insensitive one could read
// differently are refused by strict decoding before any guardrail or
// tool sees them: the model reads an error, nothing runs.
func TestHostileArgumentsNeverReachToolGuardrail(t *testing.T) {
	for _, tc := range []struct{ name, args string }{
		{"case-variant key", `{"cmd":"echo ok","CMD":"touch PWNED"}`},
		{"duplicate key", `{"cmd":"echo ok","cmd":"touch PWNED"}`},
		{"trailing object", `{"cmd":"echo ok"}{"cmd":"touch PWNED"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t)
			srv.Enqueue(
				fakeopenai.Calls(fakeopenai.FunctionCall("c1", "exec_command", tc.args)),
				fakeopenai.Text("done"),
			)
			e, dir := guardedEngine(t, srv)
			st := planApply(t, e, PlanOptions{})
			if found(t, dir, "PWNED") {
				t.Fatal("PWNED was written")
			}
			if r := st.Runs["run.r"]; r.Status != RunCompleted {
				t.Fatalf("run %s, want completed (the call is a tool error the model reads)", r.Status)
			}
			if out := sentOutputs(srv)["c1"]; !strings.HasPrefix(out, "error: exec_command: invalid arguments") {
				t.Errorf("the model read %q, want the strict decoding error", out)
			}
			if vs := guardVerdicts(t, e); len(vs) != 0 {
				t.Errorf("verdicts %+v: the guardrail saw arguments that never run", vs)
			}
		})
	}
}

// TestHostileToolOutputNeverReachesModel: an output its tool_output
// guardrail stops is never sent to the model, even when the same
// response's other call passed; the run stops as guardrail_tripped.
func TestHostileToolOutputNeverReachesModel(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(
		fakeopenai.Calls(fakeopenai.FunctionCall("ok1", "exec_command", `{"cmd":"echo fine"}`)),
		fakeopenai.Calls(fakeopenai.FunctionCall("leak_1", "exec_command", `{"cmd":"echo SECRET-7f3a"}`)),
		fakeopenai.Text("done"),
	)
	e, _ := guardedEngine(t, srv)
	err := applyErr(t, e, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), `guardrail "no_secret" tripped on the output of a call of exec_command (agent "a"): tool output must not carry secrets`) {
		t.Fatalf("apply: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2 (none after the trip)", len(reqs))
	}
	if out := sentOutputs(srv)["ok1"]; !strings.Contains(out, "fine") {
		t.Errorf("the passed output was not sent: %q", out)
	}
	for _, r := range reqs {
		if strings.Contains(string(r.Body), "SECRET-7f3a") || strings.Contains(strings.Join(r.InputLines(), "\n"), "output leak_1") {
			t.Fatalf("request %d carries the tripped output", r.Seq)
		}
	}
	r := readState(t, e).Runs["run.r"]
	if r.Status != RunGuardrailTripped || r.Guardrail == nil || r.Guardrail.Name != "no_secret" || r.Guardrail.On != "tool_output" {
		t.Fatalf("run.r = %s, guardrail %+v", r.Status, r.Guardrail)
	}
}

// fileText is the content of the first file named name under dir.
func fileText(t *testing.T, dir, name string) string {
	t.Helper()
	var text string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == name && text == "" {
			b, _ := os.ReadFile(p)
			text = string(b)
		}
		return nil
	})
	return text
}

// TestToolOutputTripResumeDoesNotRerunTool: a run stopped by a
// tool_output guardrail resumes (its configuration unchanged) to the
// same trip from its journal: the tool does not run again (its side
// effect happens once), the model is not asked again, and the withheld
// output is never sent.
func TestToolOutputTripResumeDoesNotRerunTool(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(
		fakeopenai.Calls(fakeopenai.FunctionCall("leak", "exec_command", `{"cmd":"echo SECRET-7f3a | tee -a runs.log"}`)),
		fakeopenai.Text("done"),
	)
	e, dir := guardedEngine(t, srv)
	want := `guardrail "no_secret" tripped on the output of a call of exec_command (agent "a"): tool output must not carry secrets`
	if err := applyErr(t, e, PlanOptions{}); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("apply: %v", err)
	}
	_, p := plan(t, e, PlanOptions{})
	if c := p.Change("run.r"); c.Action != ActionResume {
		t.Fatalf("plan: %s %q", c.Action, c.Reasons)
	}
	if err := applyErr(t, e, PlanOptions{}); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("resume: %v", err)
	}
	if got := fileText(t, dir, "runs.log"); got != "SECRET-7f3a\n" {
		t.Fatalf("runs.log = %q: the tool ran again on resume", got)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
	if strings.Contains(string(srv.Requests()[0].Body), "SECRET-7f3a") {
		t.Error("the withheld output was sent")
	}
	r := readState(t, e).Runs["run.r"]
	if r.Status != RunGuardrailTripped || r.Guardrail == nil || r.Guardrail.Name != "no_secret" || r.Guardrail.Tool != "exec_command" {
		t.Fatalf("run.r = %s, guardrail %+v", r.Status, r.Guardrail)
	}
	n := 0
	for _, v := range guardVerdicts(t, e) {
		if v.Name == "no_secret" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d no_secret verdicts, want 1 (the recorded one stands)", n)
	}
}
