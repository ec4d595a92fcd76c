package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/state"
)

// terminalApprover asks about tool calls that need approval on the
// terminal, one question at a time however many runs ask. While a
// question waits for its answer, the views' output (other runs' progress
// and text) is held back, and written after the answer.
type terminalApprover struct {
	m  *meta
	mu sync.Mutex
	// chat is set in agentctl chat, which has no later decision: a call
	// not approved is refused for the turn.
	chat bool
}

// Approve prints the call and reads the answer: yes, always, no[: reason],
// never[: reason], or an empty line (or end of input) to defer it.
func (t *terminalApprover) Approve(ctx context.Context, run string, call state.Approval) engine.Answer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ctx.Err() != nil {
		return engine.Answer{}
	}
	release := t.m.hold.Start()
	defer release()
	scope := "run"
	if t.chat {
		scope = "session"
	}
	w := t.m.Stdout
	fmt.Fprintf(w, "\n%s: agent.%s wants to call %s (call %s):\n  %s\n", run, termtext.Line(call.Agent), termtext.Line(call.Tool), termtext.Line(call.CallID), termtext.Printable(call.Arguments))
	fmt.Fprintf(w, "  Approve? yes, no[: reason], always or never[: reason] (this tool, for the rest of the %s), or empty to decide later: ", scope)
	line, err := t.m.stdinReader().ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(w)
		return engine.Answer{}
	}
	ans, ok := parseAnswer(line)
	for !ok {
		fmt.Fprintf(w, "  Answer yes, always, no[: reason], never[: reason] or an empty line: ")
		if line, err = t.m.stdinReader().ReadString('\n'); err != nil && line == "" {
			fmt.Fprintln(w)
			return engine.Answer{}
		}
		ans, ok = parseAnswer(line)
	}
	ans.By = t.m.reviewer()
	switch ans.Decision {
	case state.ApprovalPending:
		if t.chat {
			fmt.Fprintf(w, "  Not approved: the call is refused for this turn.\n")
			break
		}
		fmt.Fprintf(w, "  Deferred: agentctl approve %s %s (or reject) decides later.\n", run, call.CallID)
	default:
		fmt.Fprintf(w, "  %s.\n", standingText(ans, run, call.Tool, t.chat))
	}
	return ans
}

// standingText says what the answer decided: "approved", or with always
// and never the same for the tool's later calls, and how to take it back.
func standingText(ans engine.Answer, run, tool string, chat bool) string {
	if !ans.Always {
		return ans.Decision
	}
	tool = termtext.Line(tool)
	if chat {
		return fmt.Sprintf("%s; so is every later call of %s in this session", ans.Decision, tool)
	}
	cmd := "approve"
	if ans.Decision == state.ApprovalRejected {
		cmd = "reject"
	}
	return fmt.Sprintf("%s; so is every later call of %s in %s, also after it resumes (agentctl %s %s -tool %s -revoke takes that back)", ans.Decision, tool, run, cmd, run, tool)
}

// parseAnswer reads one answer to the approval question.
func parseAnswer(line string) (engine.Answer, bool) {
	s := strings.TrimSpace(line)
	word, reason, _ := strings.Cut(s, ":")
	word, reason = strings.ToLower(strings.TrimSpace(word)), strings.TrimSpace(reason)
	switch word {
	case "":
		return engine.Answer{}, true
	case "yes", "y":
		return engine.Answer{Decision: state.ApprovalApproved, Reason: reason}, true
	case "always":
		return engine.Answer{Decision: state.ApprovalApproved, Always: true, Reason: reason}, true
	case "no", "n":
		return engine.Answer{Decision: state.ApprovalRejected, Reason: reason}, true
	case "never":
		return engine.Answer{Decision: state.ApprovalRejected, Always: true, Reason: reason}, true
	}
	return engine.Answer{}, false
}
