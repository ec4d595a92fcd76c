package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/state"
)

// refresh reads the state, as a chat does under the lock before a turn,
// and refreshes s with it.
func refresh(t *testing.T, e *engine.Engine, s *Session) ([]string, error) {
	t.Helper()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Refresh(context.Background(), st)
}

// editState changes the state as another agentctl command would.
func editState(t *testing.T, e *engine.Engine, fn func(*state.State)) {
	t.Helper()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fn(st)
	if err := e.State.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
}

// TestChatRefreshSeesOtherSessions: a session whose conversation another
// chat continued between its turns says so and follows on from it,
// keeping every turn; one whose record was given to another agent or
// removed meanwhile ends, without writing over it.
func TestChatRefreshSeesOtherSessions(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(fakeopenai.Text("One."), fakeopenai.Text("Two."), fakeopenai.Text("Three."))
	e := newTestEngine(t, fmt.Sprintf(chatOpenAIConfig, srv.URL))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	ctx := context.Background()

	mine := openChat(t, e, "s1", "assistant")
	if notices, err := refresh(t, e, mine); err != nil || len(notices) != 0 {
		t.Fatalf("refresh with nothing changed: %q, %v", notices, err)
	}
	if _, err := mine.Turn(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	other := openChat(t, e, "s1", "assistant")
	if _, err := other.Turn(ctx, "two"); err != nil {
		t.Fatal(err)
	}

	notices, err := refresh(t, e, mine)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"chat.s1 was continued by another agentctl command since this session's last turn (2 turns now): this session follows on from them."}
	if diff := cmp.Diff(want, notices); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	if _, err := mine.Turn(ctx, "three"); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	wantInput := []string{"user: one", "assistant: One.", "user: two", "assistant: Two.", "user: three"}
	if diff := cmp.Diff(wantInput, reqs[len(reqs)-1].InputLines()); diff != "" {
		t.Errorf("the third turn's request (-want +got):\n%s", diff)
	}
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := st.Chats["chat.s1"]; c == nil || c.Turns != 3 {
		t.Fatalf("record after three turns in two sessions: %+v", c)
	}

	editState(t, e, func(st *state.State) { st.Chats["chat.s1"].Agent = "helper" })
	_, err = refresh(t, e, mine)
	var gone *GoneError
	if !errors.As(err, &gone) || !strings.Contains(err.Error(), "chat.s1 was made a conversation with agent.helper by another agentctl command since this session's last turn") {
		t.Errorf("refresh after the session changed agent: %v", err)
	}
	editState(t, e, func(st *state.State) { delete(st.Chats, "chat.s1") })
	_, err = refresh(t, e, mine)
	if !errors.As(err, &gone) || !strings.Contains(err.Error(), "chat.s1 was removed from the state by another agentctl command") ||
		!strings.Contains(err.Error(), "agentctl chat -session s1 agent.assistant again to start a new one") {
		t.Errorf("refresh after the session was removed: %v", err)
	}
}

const chatSandboxConfig = `
provider "openai" {
  base_url    = %q
  max_retries = 0
}
provider "local" {
  isolation = "none"
}
sandbox "box" {
  provider = provider.local
}
capability "shell" "default" {}
agent "assistant" {
  model        = "gpt-test"
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}
`

// TestChatRefreshReopensSandboxes: a sandbox of the session that another
// command stopped or removed from the state between turns is started or
// created again, and the state says so.
func TestChatRefreshReopensSandboxes(t *testing.T) {
	srv := fakeopenai.New(t)
	e := newTestEngine(t, fmt.Sprintf(chatSandboxConfig, srv.URL))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	s := openChat(t, e, "s1", "assistant")
	first := s.sess.Workspaces()["sandbox.box"]

	editState(t, e, func(st *state.State) { st.Sandboxes["sandbox.box"].Status = state.SandboxStopped })
	notices, err := refresh(t, e, s)
	want := []string{"sandbox.box was stopped by another agentctl command since this session's last turn: it is started again."}
	if err != nil || !cmp.Equal(want, notices) {
		t.Fatalf("refresh after a stop: %q, %v; want %q", notices, err, want)
	}
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Sandboxes["sandbox.box"].Status; got != state.SandboxRunning {
		t.Errorf("sandbox.box is %s after the refresh, want running", got)
	}

	editState(t, e, func(st *state.State) { delete(st.Sandboxes, "sandbox.box") })
	notices, err = refresh(t, e, s)
	want = []string{"sandbox.box was removed from the state by another agentctl command since this session's last turn: it is created again."}
	if err != nil || !cmp.Equal(want, notices) {
		t.Fatalf("refresh after state rm: %q, %v; want %q", notices, err, want)
	}
	if st, err = e.State.Read(context.Background()); err != nil || st.Sandboxes["sandbox.box"] == nil {
		t.Fatalf("sandbox.box is not in the state after the refresh (%v)", err)
	}
	if s.sess.Workspaces()["sandbox.box"] == first {
		t.Error("the session still uses the sandbox it opened first")
	}
}
