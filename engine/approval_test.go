package engine

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/state"
)

const approvalConfig = `
provider "scripted" {
  script "guard" {
    reply {
      call "exec_command" {
        arguments = { cmd = "ls" }
      }
      call "exec_command" {
        arguments = { cmd = "echo boom > DANGEROUS" }
      }
    }
    reply { text = "guarded done" }
  }
  script "free" {
    reply { text = "free done" }
  }
  script "next" {
    reply { text = "next done" }
  }
}
provider "local" { isolation = "none" }
sandbox "s" { provider = provider.local }
locals { reads = "^(ls|cat)( |$)" }
capability "shell" "guarded" {
  needs_approval = !can(regex(local.reads, call.arguments.cmd))
}
agent "guard" {
  provider     = provider.scripted
  sandbox      = sandbox.s
  capabilities = [capability.shell.guarded]
}
agent "free" { provider = provider.scripted }
agent "next" { provider = provider.scripted }
run "guarded" {
  agent = agent.guard
  input = "clean up"
}
run "free" {
  agent = agent.free
  input = "hi"
}
run "after" {
  agent = agent.next
  input = "after ${run.guarded.output}"
}
`

// dangerous reports whether a file named DANGEROUS exists under dir.
func dangerous(t *testing.T, dir string) bool {
	t.Helper()
	found := false
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "DANGEROUS" {
			found = true
		}
		return nil
	})
	return found
}

func TestApprovalDeferDecideResume(t *testing.T) {
	for _, approve := range []bool{true, false} {
		name := map[bool]string{true: "approve", false: "reject"}[approve]
		t.Run(name, func(t *testing.T) {
			e, dir := newTestEngine(t, approvalConfig)
			var mu sync.Mutex
			var required []Event
			var waiting []string
			e.Events = func(ev Event) {
				if ev.Type == EventApplyWaiting {
					mu.Lock()
					waiting = append(waiting, ev.Address+": "+ev.Message)
					mu.Unlock()
					return
				}
				if ev.Type != EventApprovalRequired {
					return
				}
				// The state records the pending call before it is reported.
				st, err := e.State.Read(context.Background())
				if err != nil || st.Runs[ev.Address] == nil || st.Runs[ev.Address].Status != RunAwaiting || len(st.Runs[ev.Address].Pending()) != 1 {
					t.Errorf("reported before the state recorded it: %v", err)
				}
				mu.Lock()
				required = append(required, ev)
				mu.Unlock()
			}
			st := planApply(t, e, PlanOptions{})
			r := st.Runs["run.guarded"]
			if r == nil || r.Status != RunAwaiting {
				t.Fatalf("run.guarded = %+v, want awaiting_approval", r)
			}
			if st.Runs["run.free"] == nil || st.Runs["run.free"].Status != RunCompleted {
				t.Errorf("the independent run did not go on: %+v", st.Runs["run.free"])
			}
			if ar := st.Runs["run.after"]; ar != nil && ar.Status == RunFailed {
				t.Errorf("the dependent run failed: %+v", ar)
			}
			pending := r.Pending()
			if len(pending) != 1 || pending[0].Tool != "exec_command" || pending[0].Agent != "guard" || !strings.Contains(pending[0].Arguments, "DANGEROUS") || pending[0].RequestedAt.IsZero() {
				t.Fatalf("pending = %+v", pending)
			}
			if len(required) != 1 || required[0].Address != "run.guarded" || len(required[0].Approvals) != 1 || required[0].Approvals[0].CallID != pending[0].CallID {
				t.Errorf("approval_required events = %+v", required)
			}
			if dangerous(t, dir) {
				t.Fatal("DANGEROUS was written before approval")
			}
			if len(waiting) != 1 || waiting[0] != "run.after: not started: it waits for run.guarded, which awaits approval" {
				t.Errorf("waiting events = %q", waiting)
			}
			// The journal records the deferral too.
			js, err := e.readJournal(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			deferred := 0
			for _, s := range js {
				if s.Kind == agentloop.StepApproval && s.Approval != nil && s.Approval.CallID == pending[0].CallID && strings.Contains(s.Approval.Arguments, "DANGEROUS") {
					deferred++
				}
			}
			if deferred != 1 {
				t.Errorf("the journal records the deferred call %d times, want 1: %+v", deferred, js)
			}

			// A second apply without a decision keeps it awaiting.
			st = planApply(t, e, PlanOptions{})
			if st.Runs["run.guarded"].Status != RunAwaiting || dangerous(t, dir) {
				t.Fatal("an undecided call ran")
			}

			decision, reason := state.ApprovalApproved, "fine"
			if !approve {
				decision, reason = state.ApprovalRejected, "never write there"
			}
			if _, err := st.Runs["run.guarded"].Decide([]string{pending[0].CallID}, false, decision, "alice", reason, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := e.State.Write(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			p, err := e.Plan(context.Background(), st, PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := p.Change("run.guarded")
			want := "1 approved, 0 rejected, 0 pending"
			if !approve {
				want = "0 approved, 1 rejected, 0 pending"
			}
			if c == nil || c.Action != ActionResume || len(c.Reasons) != 1 || !strings.Contains(c.Reasons[0], want) {
				t.Errorf("plan: %+v, want a resume with %q", c, want)
			}

			st = planApply(t, e, PlanOptions{})
			r = st.Runs["run.guarded"]
			if r.Status != RunCompleted || st.Runs["run.after"] == nil || st.Runs["run.after"].Status != RunCompleted {
				t.Fatalf("after the decision: guarded %s, after %+v", r.Status, st.Runs["run.after"])
			}
			if got := dangerous(t, dir); got != approve {
				t.Errorf("DANGEROUS written = %v, want %v", got, approve)
			}
			if len(r.Approvals) != 1 || r.Approvals[0].Decision != decision || r.Approvals[0].DecidedBy != "alice" || r.Approvals[0].Reason != reason {
				t.Errorf("approvals = %+v", r.Approvals[0])
			}
			steps, err := e.readJournal(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			var out string
			for _, s := range steps {
				if s.Kind == agentloop.StepTool && s.Result.CallID == pending[0].CallID {
					out = s.Result.Output
				}
			}
			if !approve && out != "rejected by the reviewer: never write there" {
				t.Errorf("the model saw %q", out)
			}
		})
	}
}

// answerYes approves every call it is asked about.
type answerYes struct{ asked int }

func (a *answerYes) Approve(context.Context, string, state.Approval) Answer {
	a.asked++
	return Answer{Decision: state.ApprovalApproved, By: "operator"}
}

// TestInlineDecisionDecidesTheDeferredEntry: a call deferred by one apply
// (no reviewer) and approved at the next apply's prompt has one entry,
// decided once; deciding it again is an error naming it.
func TestInlineDecisionDecidesTheDeferredEntry(t *testing.T) {
	e, dir := newTestEngine(t, approvalConfig)
	st := planApply(t, e, PlanOptions{})
	r := st.Runs["run.guarded"]
	if r.Status != RunAwaiting || len(r.Approvals) != 1 {
		t.Fatalf("first apply: %s with %d entries", r.Status, len(r.Approvals))
	}
	id := r.Approvals[0].CallID
	yes := &answerYes{}
	e.Approver = yes
	st = planApply(t, e, PlanOptions{})
	r = st.Runs["run.guarded"]
	if yes.asked != 1 || r.Status != RunCompleted || !dangerous(t, dir) {
		t.Fatalf("second apply: asked %d, status %s", yes.asked, r.Status)
	}
	if len(r.Approvals) != 1 || r.Approvals[0].Decision != state.ApprovalApproved || r.Approvals[0].DecidedBy != "operator" {
		t.Fatalf("approvals = %+v, want the one entry approved", r.Approvals)
	}
	if a, rj, p := r.ApprovalCounts(); a != 1 || rj != 0 || p != 0 {
		t.Errorf("counts %d/%d/%d, want 1 approved", a, rj, p)
	}
	_, err := r.Decide([]string{id}, false, state.ApprovalRejected, "bob", "", time.Now())
	if err == nil || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "already approved by operator") {
		t.Fatalf("rejecting the executed call: %v, want an error naming it", err)
	}
}
