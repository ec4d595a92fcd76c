package engine

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/fakeopenai"
)

// judgedConfig is run.r on the OpenAI provider at baseURL, guarded by an
// input agent guardrail judged by agent.judge.
func judgedConfig(baseURL string) string {
	return fmt.Sprintf(`
provider "openai" {
  base_url    = %q
  max_retries = 0
}
agent "judge" {
  model         = "gpt-test"
  instructions  = "Trip on anything but business questions."
  output_schema = {
    type       = "object"
    properties = { tripwire = { type = "boolean" }, reason = { type = "string" } }
    required   = ["tripwire", "reason"]
  }
}
guardrail "on_topic" {
  on    = "input"
  agent = agent.judge
}
agent "a" {
  model      = "gpt-test"
  guardrails = [guardrail.on_topic]
}
run "r" {
  agent = agent.a
  input = "How are sales?"
}
`, baseURL)
}

// judgeModelSteps counts run.r's model steps of the judge's conversation.
func judgeModelSteps(t *testing.T, e *Engine) int {
	t.Helper()
	n := 0
	for _, s := range journalSteps(t, e, readState(t, e), "run.r") {
		if s.Kind == agentloop.StepModel && strings.HasPrefix(s.Path, "guardrail.on_topic") {
			n++
		}
	}
	return n
}

// TestJudgeReplaysFromCassette: an apply recorded with an agent
// guardrail replays with no model server: the judge's call is replayed
// and decides as it did (passing, then tripping).
func TestJudgeReplaysFromCassette(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verdict map[string]any
		status  string
	}{
		{"passes", map[string]any{"tripwire": false, "reason": "a business question"}, RunCompleted},
		{"trips", map[string]any{"tripwire": true, "reason": "not about business"}, RunGuardrailTripped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t)
			srv.Enqueue(fakeopenai.JSON(tc.verdict), fakeopenai.Text("Sales are up."))
			recDir := t.TempDir()
			tapes := filepath.Join(recDir, "cassettes")
			e := engineAt(t, recDir, judgedConfig(srv.URL))
			e.Record = tapes
			_ = applyErr(t, e, PlanOptions{})
			recorded := readState(t, e).Runs["run.r"]
			if recorded.Status != tc.status || judgeModelSteps(t, e) != 1 {
				t.Fatalf("recorded run %s with %d judge calls", recorded.Status, judgeModelSteps(t, e))
			}
			srv.Close()

			e = engineAt(t, t.TempDir(), judgedConfig("http://127.0.0.1:1/v1"))
			e.Environ = nil
			e.Replay = tapes
			err := applyErr(t, e, PlanOptions{})
			replayed := readState(t, e).Runs["run.r"]
			if replayed.Status != tc.status || string(replayed.Output) != string(recorded.Output) || judgeModelSteps(t, e) != 1 {
				t.Fatalf("replayed run %s (%v), output %s, %d judge calls; recorded %s, %s", replayed.Status, err, replayed.Output, judgeModelSteps(t, e), recorded.Status, recorded.Output)
			}
			if replayed.Usage.InputTokens != recorded.Usage.InputTokens {
				t.Errorf("replayed usage %+v, recorded %+v", replayed.Usage, recorded.Usage)
			}
			if tc.status == RunGuardrailTripped && (replayed.Guardrail == nil || !strings.Contains(replayed.Guardrail.Message, "not about business")) {
				t.Errorf("replayed trip %+v", replayed.Guardrail)
			}
		})
	}
}
