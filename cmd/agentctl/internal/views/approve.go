package views

import (
	"fmt"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/state"
)

// Approve shows the decisions agentctl approve and reject recorded.
type Approve interface {
	Decided(run string, decided []*state.Approval, pending int)
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

type approveJSON struct{ *jsonEvents }

func (v approveJSON) Decided(run string, decided []*state.Approval, pending int) {
	for _, a := range decided {
		v.emit(map[string]any{"type": "approval_decided", "address": run, "approval": a, "pending": pending})
	}
}
