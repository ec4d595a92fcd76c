package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/graph"
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

// decisions are the reviewer's decisions recorded on a run being resumed,
// each bound to its call's conversation, id, tool and digest.
func decisions(prev *state.Run, resume bool) map[agentloop.DecisionKey]agentloop.Decision {
	if !resume || prev == nil {
		return nil
	}
	d := map[agentloop.DecisionKey]agentloop.Decision{}
	for _, ap := range prev.Approvals {
		if ap.Decision != state.ApprovalPending {
			d[agentloop.DecisionKey{Path: ap.Path, CallID: ap.CallID}] = agentloop.Decision{
				Approved: ap.Decision == state.ApprovalApproved, Reason: ap.Reason, Tool: ap.Tool, Digest: ap.Digest,
			}
		}
	}
	return d
}

// sameCall reports whether a records the pending call c: one entry per
// call, found by its conversation, id, tool and digest.
func sameCall(a *state.Approval, c agentloop.PendingCall) bool {
	return a.CallID == c.CallID && a.Path == c.Path && a.Tool == c.Tool && (a.Digest == "" || a.Digest == c.Digest)
}

// pendingEntry is the index of c's undecided entry in approvals, or -1.
func pendingEntry(approvals []*state.Approval, c agentloop.PendingCall) int {
	return slices.IndexFunc(approvals, func(a *state.Approval) bool { return sameCall(a, c) && a.Decision == state.ApprovalPending })
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
		if i := pendingEntry(r.Approvals, c); i >= 0 {
			r.Approvals[i].Digest = c.Digest
			continue
		}
		r.Approvals = append(r.Approvals, pendingApproval(c, scrub, now))
	}
}

// pendingApproval is the state's record of the pending call c.
func pendingApproval(c agentloop.PendingCall, scrub *sandbox.Scrubber, now time.Time) *state.Approval {
	return &state.Approval{
		CallID: c.CallID, Path: c.Path, Agent: c.Agent, Tool: c.Tool, Digest: c.Digest,
		Arguments: scrubJSONString(scrub, c.Arguments), RequestedAt: now,
	}
}

// recordDecision records the reviewer's decision on call in approvals:
// on the call's pending entry when one exists (an apply that deferred it
// recorded one), else as a new entry. One entry per call.
func recordDecision(approvals []*state.Approval, c agentloop.PendingCall, decided *state.Approval) []*state.Approval {
	i := pendingEntry(approvals, c)
	if i < 0 {
		return append(approvals, decided)
	}
	a := approvals[i]
	a.Digest, a.Decision, a.DecidedBy, a.DecidedAt, a.Reason = c.Digest, decided.Decision, decided.DecidedBy, decided.DecidedAt, decided.Reason
	return approvals
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

// Answer is a reviewer's answer to a question about one call.
type Answer struct {
	// Decision is state.ApprovalApproved, state.ApprovalRejected, or
	// state.ApprovalPending to defer the call.
	Decision string
	Reason   string
	// Always makes the decision stand for the later calls of the same
	// tool in this run (always, or never with a rejection): recorded in
	// the run's state (state.Run.ToolDecisions), so that a resumed run
	// keeps it.
	Always bool
	// By names the reviewer.
	By string
}

// Approver asks a reviewer about a call while apply runs (agentctl's
// terminal prompt). The call's arguments are scrubbed.
type Approver interface {
	Approve(ctx context.Context, run string, call state.Approval) Answer
}

// asker is the Runner.Ask of run addr: it decides a call by the run's
// standing decision on its tool, else asks the engine's Approver, and
// records each decision in the state before the call runs. nil without
// an Approver or a standing decision.
func (a *applier) asker(addr string, scrub *sandbox.Scrubber) func(context.Context, agentloop.PendingCall) (agentloop.Decision, bool) {
	ap := a.e.Approver
	if ap == nil && !a.hasToolDecisions(addr) {
		return nil
	}
	return func(ctx context.Context, c agentloop.PendingCall) (agentloop.Decision, bool) {
		call := *pendingApproval(c, scrub, time.Now().UTC())
		ans, standing := a.toolDecision(addr, c.Tool)
		if !standing {
			if ap == nil {
				return agentloop.Decision{}, false
			}
			a.asking.Add(1)
			ans = ap.Approve(ctx, addr, call)
			a.asking.Add(-1)
		}
		if ans.Decision != state.ApprovalApproved && ans.Decision != state.ApprovalRejected {
			return agentloop.Decision{}, false
		}
		now := time.Now().UTC()
		call.Decision, call.DecidedBy, call.DecidedAt, call.Reason = ans.Decision, ans.By, now, ans.Reason
		if err := a.update(ctx, func(st *state.State) {
			if r := st.Runs[addr]; r != nil {
				r.Approvals = recordDecision(r.Approvals, c, &call)
				if ans.Always && !standing {
					r.SetToolDecision(c.Tool, state.ToolDecision{Decision: ans.Decision, DecidedBy: ans.By, DecidedAt: now, Reason: ans.Reason})
				}
			}
		}, state.RunRef(addr)); err != nil {
			// Not recorded: the call is not decided; it waits.
			return agentloop.Decision{}, false
		}
		return agentloop.Decision{Approved: ans.Decision == state.ApprovalApproved, Reason: ans.Reason}, true
	}
}

// hasToolDecisions reports whether run addr has standing decisions.
func (a *applier) hasToolDecisions(addr string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.st.Runs[addr]
	return r != nil && len(r.ToolDecisions) > 0
}

// toolDecision is run addr's standing decision on tool, as the answer
// that decides the call.
func (a *applier) toolDecision(addr, tool string) (Answer, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.st.Runs[addr]
	if r == nil {
		return Answer{}, false
	}
	d, ok := r.ToolDecisions[tool]
	return Answer{Decision: d.Decision, By: d.DecidedBy, Reason: d.CallReason()}, ok
}

// reportWaiting reports the objects not started because a run they
// depend on (directly or through other such objects) ended awaiting
// approval, and no dependency of theirs failed: they wait, they did not
// fail, and the apply that follows the decision starts them.
func (e *Engine) reportWaiting(g *graph.Graph, p *Plan, errs map[string]error) {
	waitingOn := map[string]string{} // object → the run awaiting approval
	for addr, err := range errs {
		if errors.Is(err, errRunAwaiting) {
			waitingOn[addr] = addr
		}
	}
	for changed := len(waitingOn) > 0; changed; {
		changed = false
		for _, c := range p.Changes {
			if _, done := waitingOn[c.Address]; done || !errors.Is(errs[c.Address], graph.ErrSkipped) {
				continue
			}
			root, blocked := "", false
			for _, d := range g.DependenciesOf(c.Address) {
				err := errs[d]
				switch r, ok := waitingOn[d]; {
				case ok:
					root = r
				case err != nil:
					blocked = true // failed, or skipped for another reason (so far)
				}
			}
			if root != "" && !blocked {
				waitingOn[c.Address] = root
				changed = true
			}
		}
	}
	for _, c := range p.Changes {
		if root := waitingOn[c.Address]; root != "" && root != c.Address {
			e.emit(Event{Type: EventApplyWaiting, Address: c.Address, Action: c.Action, Message: fmt.Sprintf("not started: it waits for %s, which awaits approval", root)})
		}
	}
}
