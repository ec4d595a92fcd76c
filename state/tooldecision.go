package state

import (
	"fmt"
	"time"
)

// ToolDecision is a reviewer's standing decision on one tool of a run:
// every later call of the tool that needs approval is approved (the
// prompt's always, agentctl approve -tool) or rejected (never, agentctl
// reject -tool) without asking. Each call it decides still gets its own
// Approval entry. A resumed run keeps it; a run started over (its digest
// changed, -replace) starts without.
type ToolDecision struct {
	// Decision is ApprovalApproved or ApprovalRejected.
	Decision  string    `json:"decision"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Reason    string    `json:"reason,omitempty"`
}

// Word is the prompt's answer for d: always or never.
func (d ToolDecision) Word() string {
	if d.Decision == ApprovalRejected {
		return "never"
	}
	return "always"
}

// SetToolDecision records d as the standing decision on tool.
func (r *Run) SetToolDecision(tool string, d ToolDecision) {
	if r.ToolDecisions == nil {
		r.ToolDecisions = map[string]ToolDecision{}
	}
	r.ToolDecisions[tool] = d
}

// DecideTool records a standing decision (ApprovalApproved or
// ApprovalRejected) on tool, and makes the same decision on the run's
// pending calls of it, which it returns. A completed run is an error: no
// later call would be decided (a re-run starts without standing
// decisions).
func (r *Run) DecideTool(tool, decision, by, reason string, at time.Time) ([]*Approval, error) {
	if r.Status == RunCompleted {
		return nil, fmt.Errorf("%s has completed, so no later call of %s would be decided: a run started over (-replace, a changed input) starts without standing decisions", r.Address, tool)
	}
	d := ToolDecision{Decision: decision, DecidedBy: by, DecidedAt: at.UTC(), Reason: reason}
	r.SetToolDecision(tool, d)
	var decided []*Approval
	for _, a := range r.Pending() {
		if a.Tool == tool {
			a.Decision, a.DecidedBy, a.DecidedAt, a.Reason = decision, by, at.UTC(), d.CallReason()
			decided = append(decided, a)
		}
	}
	return decided, nil
}

// RevokeTool withdraws the standing decision on tool, which must be
// decision (approve -revoke withdraws an always, reject -revoke a never),
// and returns it: the later calls of the tool are asked about again.
func (r *Run) RevokeTool(tool, decision string) (ToolDecision, error) {
	d, ok := r.ToolDecisions[tool]
	switch {
	case !ok:
		return d, fmt.Errorf("%s has no standing decision on %s to revoke; agentctl show %s lists its standing decisions", r.Address, tool, r.Address)
	case d.Decision != decision:
		cmd := "approve"
		if d.Decision == ApprovalRejected {
			cmd = "reject"
		}
		return d, fmt.Errorf("%s: the standing decision on %s is %s (%s by %s), not %s: agentctl %s %s -tool %s -revoke withdraws it", r.Address, tool, d.Word(), d.Decision, d.DecidedBy, decision, cmd, r.Address, tool)
	}
	delete(r.ToolDecisions, tool)
	if len(r.ToolDecisions) == 0 {
		r.ToolDecisions = nil
	}
	return d, nil
}

// CallReason is the reason recorded on a call d decides, and the one a
// rejected call's model reads: "always approved for this run" (or
// rejected), then d's own reason.
func (d ToolDecision) CallReason() string {
	s := "always " + d.Decision + " for this run"
	if d.Reason != "" {
		s += ": " + d.Reason
	}
	return s
}

// CheckToolDecisions checks what decoding cannot: each standing decision
// approves or rejects.
func CheckToolDecisions(r *Run) error {
	for tool, d := range r.ToolDecisions {
		if d.Decision != ApprovalApproved && d.Decision != ApprovalRejected {
			return fmt.Errorf("tool_decisions[%q] has decision %q, which is neither %q nor %q; the file is damaged or was edited by hand (remove the entry to be asked again)", tool, d.Decision, ApprovalApproved, ApprovalRejected)
		}
	}
	return nil
}
