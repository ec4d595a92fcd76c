package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/fakeopenai"
)

const chatGuardedConfig = `
provider "openai" {
  base_url    = %q
  max_retries = 0
}
guardrail "no_password" {
  on        = "input"
  condition = !can(regex("(?i)password", guard.text))
  message   = "do not send passwords"
}
guardrail "no_keys" {
  on        = "output"
  condition = !can(regex("(?i)api[_-]?key", guard.text))
  message   = "the answer must not mention API keys"
}
agent "assistant" {
  model      = "gpt-test"
  guardrails = [guardrail.no_password, guardrail.no_keys]
}
`

// TestChatGuardrailTripsTurn: an agent's own input guardrail stops a
// chat turn before any model call, its output guardrail stops a turn
// whose answer it refuses; each is reported naming the guardrail and
// its message, and the turn is dropped: later turns never carry the
// refused line or answer.
func TestChatGuardrailTripsTurn(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(fakeopenai.Text("Your api_key is sk-1."), fakeopenai.Text("Hello."))
	e := newTestEngine(t, fmt.Sprintf(chatGuardedConfig, srv.URL))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	ctx := context.Background()
	s := openChat(t, e, "s1", "assistant")

	_, err := s.Turn(ctx, "my password is hunter2")
	var te *TurnError
	if !errors.As(err, &te) || err.Error() != `chat.s1: guardrail "no_password" stopped the turn on its input (agent "assistant"): do not send passwords; the turn was dropped (the conversation is as it was before it)` {
		t.Fatalf("input trip: %v", err)
	}
	if trip, ok := agentloop.IsGuardrailTripped(err); !ok || trip.Verdict.Name != "no_password" {
		t.Fatalf("the error does not carry the trip: %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d model requests after an input trip, want 0", n)
	}

	_, err = s.Turn(ctx, "what is my key?")
	if err == nil || !strings.Contains(err.Error(), `guardrail "no_keys" stopped the turn on its answer (agent "assistant"): the answer must not mention API keys`) {
		t.Fatalf("output trip: %v", err)
	}

	res, err := s.Turn(ctx, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"Hello."` {
		t.Fatalf("reply %s", res.Output)
	}
	reqs := srv.Requests()
	last := strings.Join(reqs[len(reqs)-1].InputLines(), "\n")
	if last != "user: hi" {
		t.Fatalf("the turn after two trips sent:\n%s\nwant only its own line", last)
	}
}
