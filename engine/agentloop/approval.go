package agentloop

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/model"
)

// ApprovalPolicy says whether one call of a tool needs a reviewer's
// approval before it runs. An error is shown to the model as the call's
// output (the call does not run).
type ApprovalPolicy func(call model.Item) (bool, error)

// Decision is a reviewer's decision on one call.
type Decision struct {
	Approved bool
	// Reason is why; a rejected call's output gives it to the model.
	Reason string
}

// PendingCall is a call that needs approval and has no decision yet.
type PendingCall struct {
	CallID string `json:"call_id"`
	// Path is the nested conversation of the call, as in Step.
	Path      string `json:"path,omitempty"`
	Agent     string `json:"agent"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
}

// AwaitingApprovalError ends a run that has calls waiting for a
// decision. Everything before them is checkpointed: the run resumes
// where it stopped once they are decided.
type AwaitingApprovalError struct {
	Calls []PendingCall
}

func (e *AwaitingApprovalError) Error() string {
	ids := make([]string, len(e.Calls))
	for i, c := range e.Calls {
		ids[i] = c.Tool + " " + c.CallID
	}
	return fmt.Sprintf("awaiting approval of %d tool call(s): %s", len(e.Calls), strings.Join(ids, ", "))
}

// IsAwaitingApproval returns the pending calls of an error that ended a
// run awaiting approval.
func IsAwaitingApproval(err error) ([]PendingCall, bool) {
	if aw, ok := errors.AsType[*AwaitingApprovalError](err); ok {
		return aw.Calls, true
	}
	return nil, false
}

// RejectedOutput is the output the model sees for a rejected call, as
// the Agents SDK words it.
func RejectedOutput(reason string) string {
	if reason == "" {
		return "rejected by the reviewer"
	}
	return "rejected by the reviewer: " + reason
}

// gate is what approval says about one call.
type gate int

const (
	gateRun     gate = iota // no approval needed, or approved
	gateReject              // rejected: the output is the rejection
	gateError               // the policy failed: the output is its error
	gatePending             // no decision yet
)

// approval decides whether call may run now. text is the call's output
// for gateReject and gateError.
func (f *frame) approval(ctx context.Context, a *Agent, call model.Item) (g gate, text string) {
	policy := a.Approvals[call.Name]
	if policy == nil {
		return gateRun, ""
	}
	need, err := policy(call)
	if err != nil {
		return gateError, "error: " + err.Error()
	}
	if !need {
		return gateRun, ""
	}
	ctx, end := f.approvalSpan(ctx, a, call)
	source := "recorded"
	d, ok := f.st.r.Decisions[call.CallID]
	if !ok && f.st.r.Ask != nil {
		source = "reviewer"
		d, ok = f.st.r.Ask(ctx, PendingCall{CallID: call.CallID, Path: f.path, Agent: a.Name, Tool: call.Name, Arguments: call.Arguments})
	}
	if !ok {
		end("pending", source)
		return gatePending, ""
	}
	if d.Approved {
		end("approved", source)
		return gateRun, ""
	}
	end("rejected", source)
	return gateReject, RejectedOutput(d.Reason)
}
