package state

import (
	"strings"
	"testing"
	"time"
)

// TestDecideTool: a standing decision decides the run's pending calls of
// its tool, and only those; a completed run takes none.
func TestDecideTool(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	r := &Run{Address: "run.r", Status: RunAwaitingApproval, Approvals: []*Approval{
		{CallID: "c1", Tool: "exec_command"},
		{CallID: "c2", Tool: "apply_patch"},
		{CallID: "c0", Tool: "exec_command", Decision: ApprovalApproved, DecidedBy: "bob", DecidedAt: at},
	}}
	got, err := r.DecideTool("exec_command", ApprovalRejected, "alice", "no shell", at)
	if err != nil || len(got) != 1 || got[0].CallID != "c1" {
		t.Fatalf("got %+v, %v", got, err)
	}
	if a := got[0]; a.Decision != ApprovalRejected || a.DecidedBy != "alice" || a.Reason != "always rejected for this run: no shell" || a.DecidedAt.Location() != time.UTC {
		t.Errorf("the pending call: %+v", a)
	}
	if a := r.Approvals[2]; a.DecidedBy != "bob" {
		t.Errorf("a decided call was decided again: %+v", a)
	}
	want := ToolDecision{Decision: ApprovalRejected, DecidedBy: "alice", DecidedAt: at.UTC(), Reason: "no shell"}
	if d := r.ToolDecisions["exec_command"]; d != want {
		t.Errorf("standing decision %+v, want %+v", d, want)
	}

	r.Status = RunCompleted
	if _, err := r.DecideTool("apply_patch", ApprovalApproved, "alice", "", at); err == nil || !strings.Contains(err.Error(), "run.r has completed, so no later call of apply_patch would be decided") {
		t.Errorf("completed run: %v", err)
	}
}

// TestRevokeTool: a revoke names the kind it withdraws.
func TestRevokeTool(t *testing.T) {
	r := &Run{Address: "run.r"}
	r.SetToolDecision("exec_command", ToolDecision{Decision: ApprovalApproved, DecidedBy: "alice"})
	if _, err := r.RevokeTool("exec_command", ApprovalRejected); err == nil || !strings.Contains(err.Error(), "is always (approved by alice), not rejected: agentctl approve run.r -tool exec_command -revoke withdraws it") {
		t.Errorf("wrong kind: %v", err)
	}
	if _, err := r.RevokeTool("apply_patch", ApprovalApproved); err == nil || !strings.Contains(err.Error(), "run.r has no standing decision on apply_patch to revoke") {
		t.Errorf("none: %v", err)
	}
	if d, err := r.RevokeTool("exec_command", ApprovalApproved); err != nil || d.DecidedBy != "alice" || r.ToolDecisions != nil {
		t.Errorf("revoke: %+v, %v, left %v", d, err, r.ToolDecisions)
	}
}
