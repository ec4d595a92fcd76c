package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/state"
)

// TestPromptHoldsOtherRunsOutput: while run.a's approval question waits
// for its answer, the lines of run.b and run.c (apply's human view) are
// not written between the question and the answer; once it is answered
// they all appear after it, in the order they came.
func TestPromptHoldsOtherRunsOutput(t *testing.T) {
	terminal := &testfiles.SyncBuffer{}
	keyboard, typed := io.Pipe()
	defer typed.Close()
	m := &meta{Stdout: terminal, Stderr: terminal, Environ: []string{"USER=carol"}, stdin: bufio.NewReader(keyboard)}
	view := views.NewApply(arguments.ViewHuman, m.view())
	view.Event(engine.Event{Type: engine.EventApplyStart, Address: "run.b", Action: engine.ActionExecute})

	answered := make(chan engine.Answer, 1)
	go func() {
		answered <- (&terminalApprover{m: m}).Approve(context.Background(), "run.a", state.Approval{
			CallID: "call_1", Agent: "a", Tool: "exec_command", Arguments: `{"cmd":"touch x"}`,
		})
	}()
	waitForOutput(t, "the question", func() bool { return strings.Contains(terminal.String(), "Approve?") })
	others := []string{
		"run.b: two of b",
		"run.c: Executing...",
		"run.b: three of b",
		"run.c: Run complete after 0s",
	}
	view.Event(engine.Event{Type: engine.EventApplyProgress, Address: "run.b", Message: "two of b"})
	view.Event(engine.Event{Type: engine.EventApplyStart, Address: "run.c", Action: engine.ActionExecute})
	view.Event(engine.Event{Type: engine.EventApplyProgress, Address: "run.b", Message: "three of b"})
	view.Event(engine.Event{Type: engine.EventApplyComplete, Address: "run.c", Action: engine.ActionExecute})
	for _, line := range others {
		if strings.Contains(terminal.String(), line) {
			t.Fatalf("%q was written while the question waits for its answer:\n%s", line, terminal)
		}
	}

	if _, err := io.WriteString(typed, "yes\n"); err != nil {
		t.Fatal(err)
	}
	if ans := <-answered; ans.Decision != state.ApprovalApproved || ans.By != "carol" {
		t.Fatalf("answer %+v", ans)
	}
	out := terminal.String()
	prompt, after, ok := strings.Cut(out, "Approve?")
	if !ok || !strings.Contains(prompt, "run.b: Executing...\n\nrun.a: agent.a wants to call exec_command (call call_1):\n") {
		t.Fatalf("the question is not after the earlier line:\n%s", out)
	}
	want := "  approved.\n" + strings.Join(others, "\n") + "\n"
	if _, tail, _ := strings.Cut(after, "later: "); tail != want {
		t.Errorf("after the question:\n%q\nwant\n%q", tail, want)
	}

	// With no prompt open, lines are written at once.
	view.Event(engine.Event{Type: engine.EventApplyProgress, Address: "run.b", Message: "four of b"})
	if !strings.HasSuffix(terminal.String(), "run.b: four of b\n") {
		t.Errorf("a line after the answer is not written at once:\n%s", terminal)
	}
}

// waitForOutput polls cond until it holds, failing the test after a minute.
func waitForOutput(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
