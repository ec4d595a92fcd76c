package state

import (
	"strings"
	"testing"
	"time"
)

func TestRunDecide(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	newRun := func() *Run {
		return &Run{Address: "run.r", Status: RunAwaitingApproval, Approvals: []*Approval{
			{CallID: "c1", Tool: "exec_command"},
			{CallID: "c2", Tool: "apply_patch"},
			{CallID: "c0", Tool: "exec_command", Decision: ApprovalRejected, DecidedBy: "bob", DecidedAt: at, Reason: "no"},
		}}
	}
	r := newRun()
	got, err := r.Decide([]string{"c2"}, false, ApprovalApproved, "alice", "ok", at)
	if err != nil || len(got) != 1 || got[0].CallID != "c2" || got[0].DecidedBy != "alice" || got[0].Reason != "ok" || got[0].DecidedAt.Location() != time.UTC {
		t.Fatalf("got %+v, %v", got, err)
	}
	if a, rj, p := r.ApprovalCounts(); a != 1 || rj != 1 || p != 1 {
		t.Errorf("counts %d %d %d", a, rj, p)
	}
	if got, err := r.Decide(nil, true, ApprovalRejected, "alice", "", at); err != nil || len(got) != 1 || got[0].CallID != "c1" {
		t.Errorf("-all: %+v, %v", got, err)
	}

	for _, tc := range []struct {
		name string
		ids  []string
		run  func(*Run)
		want string
	}{
		{"unknown id", []string{"c1", "nope"}, nil, `run.r has no tool call "nope" awaiting approval; its pending calls are: c1, c2`},
		{"decided", []string{"c0"}, nil, `tool call "c0" was already rejected by bob`},
		{"not awaiting", []string{"c1"}, func(r *Run) { r.Status = RunCompleted }, "run.r is not awaiting approval (its status is completed)"},
	} {
		r := newRun()
		if tc.run != nil {
			tc.run(r)
		}
		_, err := r.Decide(tc.ids, false, ApprovalApproved, "alice", "", at)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
		if len(r.Pending()) != 2 {
			t.Errorf("%s: a failed Decide changed the run", tc.name)
		}
	}
}
