package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/state"
)

// approvalPipeline: step 1 runs freely; step 2 writes DANGEROUS and needs
// approval; once approved it marks "started" and waits while "hold"
// exists, so the test can kill agentctl in the middle of it.
const approvalPipeline = `
provider "scripted" {
  script "worker" {
    reply {
      call "exec_command" {
        arguments = { cmd = "echo 'step 1' >> log.txt" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "touch started; while [ -e hold ]; do sleep 0.05; done; echo boom > DANGEROUS" }
      }
    }
    reply { text = "all done" }
  }
}
provider "local" {}
manifest "ws" {}
sandbox "box" {
  provider = provider.local
  manifest = manifest.ws
}
capability "shell" "guarded" {
  timeout        = "600s"
  needs_approval = can(regex("DANGEROUS", call.arguments.cmd))
}
agent "worker" {
  provider     = provider.scripted
  instructions = "Run the steps."
  sandbox      = sandbox.box
  capabilities = [capability.shell.guarded]
}
run "job" {
  agent = agent.worker
  input = "Run the steps."
}
`

// TestCrashAfterApproval: a run awaits approval (the process that
// deferred it exits normally; the state alone carries it), is approved,
// and agentctl is killed while the approved call runs. The next apply
// resumes with the decision kept and runs the call again to completion.
func TestCrashAfterApproval(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(approvalPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	out := h.mustRun("apply", "-auto-approve", "-no-color")
	if !strings.Contains(out, "run.job: Awaiting approval of 1 tool call(s)") {
		t.Fatalf("apply did not report the pending call:\n%s", out)
	}
	r := h.readState().Runs["run.job"]
	if r.Status != state.RunAwaitingApproval || len(r.Pending()) != 1 {
		t.Fatalf("run.job = %s with %d pending", r.Status, len(r.Pending()))
	}
	ws := h.workspace()
	if _, err := os.Stat(filepath.Join(ws, "DANGEROUS")); err == nil {
		t.Fatal("DANGEROUS written before approval")
	}
	id := r.Pending()[0].CallID
	h.mustRun("approve", "run.job", id, "-reason", "go ahead")

	hold := filepath.Join(ws, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := h.start("apply", "-auto-approve", "-no-color")
	h.waitUntil("the approved call to start", func() bool {
		_, err := os.Stat(filepath.Join(ws, "started"))
		return err == nil
	})
	p.kill(t)
	r = h.readState().Runs["run.job"]
	if len(r.Approvals) != 1 || r.Approvals[0].Decision != state.ApprovalApproved || r.Approvals[0].Reason != "go ahead" {
		t.Fatalf("the decision was lost by the crash: %+v", r.Approvals)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	out = h.mustRun("apply", "-auto-approve", "-no-color")
	r = h.readState().Runs["run.job"]
	if r.Status != state.RunCompleted || string(r.Output) != `"all done"` {
		t.Fatalf("run.job = %s %s after resuming:\n%s", r.Status, r.Output, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "DANGEROUS")); err != nil {
		t.Fatalf("the approved call did not run: %v", err)
	}
	if n := countKind(h.journal(), "tool"); n != 2 {
		t.Errorf("journal holds %d tool results, want 2", n)
	}
}
