package engine

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/internal/fakeopenai"
)

// TestContinueSendsTranscriptToOpenAI: the continued run's first request
// to the model holds run.first's items, in order, then its own input.
func TestContinueSendsTranscriptToOpenAI(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(
		fakeopenai.Calls(fakeopenai.FunctionCall("call_h", "transfer_to_analyst", `{}`)),
		fakeopenai.Text("Q3 was best."),
		fakeopenai.Text("Because of the launch."),
	)
	e, _ := newTestEngine(t, fmt.Sprintf(`
provider "openai" {
  base_url    = %q
  max_retries = 0
}
agent "triage" {
  model    = "gpt-test"
  handoffs = [agent.analyst]
}
agent "analyst" {
  model = "gpt-test"
}
run "first" {
  agent = agent.triage
  input = "Which quarter was best?"
}
run "followup" {
  agent    = agent.analyst
  input    = "Why?"
  continue = run.first
}
`, srv.URL))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	st := planApply(t, e, PlanOptions{})
	if out := string(st.Runs["run.followup"].Output); out != `"Because of the launch."` {
		t.Fatalf("followup output %s", out)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, r := range reqs {
		if r.Invalid != nil {
			t.Fatalf("request %d invalid: %v", r.Seq, r.Invalid)
		}
	}
	want := []string{
		"user: Which quarter was best?",
		"call transfer_to_analyst",
		"output call_h",
		"assistant: Q3 was best.",
		"user: Why?",
	}
	if diff := cmp.Diff(want, reqs[2].InputLines()); diff != "" {
		t.Errorf("the continued run's first request (-want +got):\n%s", diff)
	}
}
