package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// errRunAwaiting marks a run that ended awaiting approval: not a failure;
// the runs that depend on it wait for it.
var errRunAwaiting = errors.New("awaiting approval")

func isAwaiting(err error) bool {
	_, ok := agentloop.IsAwaitingApproval(err)
	return ok
}

// decisions are the reviewer's decisions recorded on a run being resumed.
func decisions(prev *state.Run, resume bool) map[string]agentloop.Decision {
	if !resume || prev == nil {
		return nil
	}
	d := map[string]agentloop.Decision{}
	for _, ap := range prev.Approvals {
		if ap.Decision != state.ApprovalPending {
			d[ap.CallID] = agentloop.Decision{Approved: ap.Decision == state.ApprovalApproved, Reason: ap.Reason}
		}
	}
	return d
}

// recordPending adds to r the calls a run that ended awaiting approval
// waits for (their arguments scrubbed), unless already recorded.
func recordPending(r *state.Run, runErr error, scrub *sandbox.Scrubber) {
	calls, ok := agentloop.IsAwaitingApproval(runErr)
	if !ok {
		return
	}
	now := time.Now().UTC()
	for _, c := range calls {
		if slices.ContainsFunc(r.Approvals, func(a *state.Approval) bool { return a.CallID == c.CallID && a.Path == c.Path }) {
			continue
		}
		r.Approvals = append(r.Approvals, &state.Approval{
			CallID: c.CallID, Path: c.Path, Agent: c.Agent, Tool: c.Tool,
			Arguments: scrubJSONString(scrub, c.Arguments), RequestedAt: now,
		})
	}
}

// awaiting reports a run the state records as awaiting approval, and
// returns errRunAwaiting.
func (a *applier) awaiting(addr string) error {
	a.mu.Lock()
	var pending []*state.Approval
	if r := a.st.Runs[addr]; r != nil {
		for _, p := range r.Pending() {
			cp := *p
			pending = append(pending, &cp)
		}
	}
	a.mu.Unlock()
	a.e.emit(Event{Type: EventApprovalRequired, Address: addr, Message: fmt.Sprintf("awaiting approval of %d tool %s", len(pending), plural(len(pending), "call", "calls")), Approvals: pending})
	return fmt.Errorf("%s: %w", addr, errRunAwaiting)
}
