package chat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/providers/builtin"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

const chatOpenAIConfig = `
provider "openai" {
  base_url    = %q
  max_retries = 0
}
agent "assistant" {
  model = "gpt-test"
}
`

// newTestEngine loads src as a configuration in a directory of its own,
// with its state in DIR/.agentctl.
func newTestEngine(t *testing.T, src string) *engine.Engine {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir, config.Options{Registry: builtin.Registry()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sd, err := local.OpenDir(filepath.Join(dir, ".agentctl"))
	if err != nil {
		t.Fatal(err)
	}
	return &engine.Engine{Config: cfg, State: sd, Version: "test", Registry: builtin.Registry()}
}

// openChat opens session with agent on a fresh read of the state, as a
// new agentctl chat process does.
func openChat(t *testing.T, e *engine.Engine, session, agent string) *Session {
	t.Helper()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), e, st, session, agent)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestChatSecondSessionSendsConversation: a second session's first model
// request carries the first session's turns, in order, then its line.
func TestChatSecondSessionSendsConversation(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(fakeopenai.Text("Hello, Ada."), fakeopenai.Text("Your name is Ada."))
	e := newTestEngine(t, fmt.Sprintf(chatOpenAIConfig, srv.URL))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	ctx := context.Background()

	s := openChat(t, e, "s1", "assistant")
	if _, err := s.Turn(ctx, "I am Ada."); err != nil {
		t.Fatal(err)
	}
	s = openChat(t, e, "s1", "assistant")
	res, err := s.Turn(ctx, "What is my name?")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Output); got != `"Your name is Ada."` {
		t.Errorf("second reply %s", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	want := []string{"user: I am Ada.", "assistant: Hello, Ada.", "user: What is my name?"}
	if diff := cmp.Diff(want, reqs[1].InputLines()); diff != "" {
		t.Errorf("the second session's request (-want +got):\n%s", diff)
	}
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := st.Chats["chat.s1"]
	if c == nil || c.Turns != 2 || c.Status != state.ChatIdle || c.Agent != "assistant" {
		t.Fatalf("record %+v", c)
	}
	// Only the last turn's journal is kept: its transcript is the whole
	// conversation.
	items, err := History(context.Background(), e, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 4 {
		t.Errorf("history has %d items, want 4", len(items))
	}

	// Another agent cannot take the session over.
	if _, err := Open(ctx, e, st, "s1", "nobody"); err == nil {
		t.Error("an undeclared agent opened the session")
	}
}

// TestChatInterruptedTurnResumes: a turn cut short stays in the state and
// the next session finishes it from its checkpoint, without the line
// being typed again.
func TestChatInterruptedTurnResumes(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(fakeopenai.Text("Resumed answer."))
	e := newTestEngine(t, fmt.Sprintf(chatOpenAIConfig, srv.URL))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	ctx := context.Background()

	stop := make(chan struct{})
	close(stop)
	e.Interrupt = stop
	s := openChat(t, e, "default", "assistant")
	_, err := s.Turn(ctx, "Are you there?")
	if !errors.Is(err, agentloop.ErrInterrupted) {
		t.Fatalf("turn error %v, want interrupted", err)
	}
	e.Interrupt = nil
	s = openChat(t, e, "default", "assistant")
	input, ok := s.Interrupted()
	if !ok || input != "Are you there?" {
		t.Fatalf("Interrupted() = %q, %v", input, ok)
	}
	if _, err := s.Turn(ctx, "another line"); err == nil {
		t.Error("a new turn started before the interrupted one was resumed")
	}
	res, err := s.Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Output); got != `"Resumed answer."` {
		t.Errorf("reply %s", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	if diff := cmp.Diff([]string{"user: Are you there?"}, reqs[0].InputLines()); diff != "" {
		t.Errorf("the resumed request (-want +got):\n%s", diff)
	}
	if _, ok := s.Interrupted(); ok {
		t.Error("the turn is still under way after Resume")
	}
	if err := s.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	items, err := s.History(context.Background())
	if err != nil || len(items) != 0 {
		t.Errorf("history after reset: %v, %v", items, err)
	}
}
