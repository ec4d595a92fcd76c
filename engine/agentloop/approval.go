package agentloop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/model"
)

// PolicyCall is what an approval policy judges: the call exactly as it
// will run.
type PolicyCall struct {
	Tool string
	// Arguments are the canonical arguments (tools.CanonicalArguments),
	// the same text the tool then decodes.
	Arguments string
	// Invocation is how the call runs, for a tool that can say
	// (tools.Describer); zero otherwise.
	Invocation tools.Invocation
}

// ApprovalPolicy says whether one call of a tool needs a reviewer's
// approval before it runs. An error refuses the call: the model is told
// the policy refused it, the operator sees the error (EventPolicyError).
type ApprovalPolicy func(call PolicyCall) (bool, error)

// PolicyRefusal is the output the model sees for a call whose approval
// policy failed: the policy's located error is for the operator.
const PolicyRefusal = "error: the call was refused by the approval policy (the policy could not judge it); the operator has been told why"

// Decision is a reviewer's decision on one call.
type Decision struct {
	Approved bool
	// Reason is why; a rejected call's output gives it to the model.
	Reason string
	// Tool and Digest bind the decision to the call it was made on: a
	// call with the same id but another tool or other arguments is not
	// the decided call. An empty Digest (a decision recorded before
	// digests were) binds by tool alone.
	Tool, Digest string
}

// DecisionKey locates a decision: the call's nested conversation and id.
type DecisionKey struct {
	Path, CallID string
}

// matches reports whether d was made on a call of tool with digest.
func (d Decision) matches(tool, digest string) bool {
	return d.Tool == tool && (d.Digest == "" || d.Digest == digest)
}

// CallDigest binds a decision to a call's content: the SHA-256 of the
// tool's name and its canonical arguments.
func CallDigest(tool, canonicalArguments string) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write([]byte(canonicalArguments))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// PendingCall is a call that needs approval and has no decision yet.
type PendingCall struct {
	CallID string `json:"call_id"`
	// Path is the nested conversation of the call, as in Step.
	Path  string `json:"path,omitempty"`
	Agent string `json:"agent"`
	Tool  string `json:"tool"`
	// Arguments are the call's canonical arguments.
	Arguments string `json:"arguments"`
	// Digest is CallDigest of the call: a decision binds to it.
	Digest string `json:"digest,omitempty"`
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

// approval decides whether call (whose arguments are canonical) may run
// now. text is the call's output for gateReject and gateError.
func (f *frame) approval(ctx context.Context, a *Agent, call model.Item) (g gate, text string) {
	policy := a.Approvals[call.Name]
	if policy == nil {
		return gateRun, ""
	}
	pc := PolicyCall{Tool: call.Name, Arguments: call.Arguments}
	if d, ok := a.tool(call.Name).(tools.Describer); ok {
		inv, err := d.Describe(call.Arguments)
		if err != nil {
			// The tool would refuse these arguments: the model reads why.
			return gateError, "error: " + err.Error()
		}
		pc.Invocation = inv
	}
	need, err := policy(pc)
	if err != nil {
		f.st.emit(Event{Type: EventPolicyError, Path: f.path, Agent: a.Name, Name: call.Name, CallID: call.CallID, Text: err.Error(), IsError: true})
		return gateError, PolicyRefusal
	}
	if !need {
		return gateRun, ""
	}
	ctx, end := f.approvalSpan(ctx, a, call)
	source := "recorded"
	digest := f.st.digest(call)
	d, ok := f.st.r.Decisions[DecisionKey{Path: f.path, CallID: call.CallID}]
	ok = ok && d.matches(call.Name, digest)
	if !ok && f.st.r.Ask != nil {
		source = "reviewer"
		d, ok = f.st.r.Ask(ctx, f.pendingCall(a, call))
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

// pendingCall describes call (canonical arguments) for a reviewer.
func (f *frame) pendingCall(a *Agent, call model.Item) PendingCall {
	return PendingCall{CallID: call.CallID, Path: f.path, Agent: a.Name, Tool: call.Name, Arguments: call.Arguments, Digest: f.st.digest(call)}
}

// digest is CallDigest of call as a reviewer sees it (Runner.Redact), so
// that a call replayed from a scrubbed journal binds to the same
// decision.
func (st *runState) digest(call model.Item) string {
	args := call.Arguments
	if st.r.Redact != nil {
		if c, err := tools.CanonicalArguments(st.r.Redact(args)); err == nil {
			args = c
		}
	}
	return CallDigest(call.Name, args)
}

// tool is a's capability tool named name, or nil.
func (a *Agent) tool(name string) tools.Tool {
	for _, t := range a.Tools {
		if t.Definition().Name == name {
			return t
		}
	}
	return nil
}
