package views

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/state"
)

// Approve shows the decisions agentctl approve and reject recorded.
type Approve interface {
	Decided(run string, decided []*state.Approval, pending int)
	// ToolDecided shows the standing decision d recorded on tool; asked
	// are the tools the run had asked about, or held a standing decision
	// on, before it (a tool not among them may be misspelled).
	ToolDecided(run, tool string, d state.ToolDecision, asked []string)
	// ToolRevoked shows the standing decision d on tool withdrawn.
	ToolRevoked(run, tool string, d state.ToolDecision)
}

// NewApprove returns the approve view of viewType.
func NewApprove(viewType arguments.ViewType, view *View) Approve {
	if viewType == arguments.ViewJSON {
		return approveJSON{newJSONEvents(view.Stdout)}
	}
	return approveHuman{view}
}

type approveHuman struct{ *View }

func (v approveHuman) Decided(run string, decided []*state.Approval, pending int) {
	for _, a := range decided {
		reason := ""
		if a.Reason != "" {
			reason = ": " + termtext.Printable(a.Reason)
		}
		fmt.Fprintf(v.Stdout, "%s: %s %s %s%s\n", run, a.Tool, termtext.Printable(a.CallID), a.Decision, reason)
	}
	if pending > 0 {
		fmt.Fprintf(v.Stdout, "%s: %d call(s) still pending; agentctl show %s lists them.\n", run, pending, run)
		return
	}
	fmt.Fprintf(v.Stdout, "%s: every call is decided; agentctl apply resumes the run.\n", run)
}

func (v approveHuman) ToolDecided(run, tool string, d state.ToolDecision, asked []string) {
	reason := ""
	if d.Reason != "" {
		reason = ": " + termtext.Printable(d.Reason)
	}
	seen := slices.Contains(asked, tool)
	tool = termtext.Line(tool)
	fmt.Fprintf(v.Stdout, "%s: %s %s for the rest of the run, without asking (%s)%s\n", run, tool, d.Decision, d.Word(), reason)
	if !seen {
		known := "no tool has asked for approval in " + run + " yet"
		if len(asked) > 0 {
			known = "the tools that have asked in " + run + ": " + termtext.Line(strings.Join(asked, ", "))
		}
		fmt.Fprintf(v.Stdout, "%s: note: no call of %s has asked for approval in this run so far (%s); check the name if it is not a tool still to come.\n", run, tool, known)
	}
}

func (v approveHuman) ToolRevoked(run, tool string, d state.ToolDecision) {
	fmt.Fprintf(v.Stdout, "%s: the standing decision on %s (%s, %s by %s) is withdrawn; its later calls are asked about again.\n", run, termtext.Line(tool), d.Word(), d.Decision, termtext.Line(d.DecidedBy))
}

type approveJSON struct{ *jsonEvents }

func (v approveJSON) ToolDecided(run, tool string, d state.ToolDecision, _ []string) {
	v.emit(map[string]any{"type": "tool_decision", "address": run, "tool": tool, "tool_decision": d})
}

func (v approveJSON) ToolRevoked(run, tool string, d state.ToolDecision) {
	v.emit(map[string]any{"type": "tool_decision_revoked", "address": run, "tool": tool, "tool_decision": d})
}

func (v approveJSON) Decided(run string, decided []*state.Approval, pending int) {
	for _, a := range decided {
		v.emit(map[string]any{"type": "approval_decided", "address": run, "approval": a, "pending": pending})
	}
}
