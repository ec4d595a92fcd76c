//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/state"
)

// alwaysPipeline asks about every exec_command, apply_patch and stamp
// call; the runs resumes after the stamp call is decided.
const alwaysPipeline = `
provider "scripted" {
  script "worker" {
    reply {
      call "exec_command" {
        arguments = { cmd = "touch A" }
      }
    }
    reply {
      call "apply_patch" {
        arguments = { input = "*** Begin Patch\n*** Add File: P1\n+one\n*** End Patch\n" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "touch B" }
      }
    }
    reply {
      call "stamp" {
        arguments = {}
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "touch C" }
      }
    }
    reply {
      call "apply_patch" {
        arguments = { input = "*** Begin Patch\n*** Add File: P2\n+two\n*** End Patch\n" }
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
  needs_approval = true
}
capability "filesystem" "guarded" {
  needs_approval = true
}
capability "command" "stamp" {
  description    = "Stamp the workspace."
  command        = ["touch", "STAMPED"]
  needs_approval = true
}
agent "worker" {
  provider     = provider.scripted
  instructions = "Run the steps."
  sandbox      = sandbox.box
  capabilities = [capability.shell.guarded, capability.filesystem.guarded, capability.command.stamp]
  max_turns    = 10
}
run "job" {
  agent = agent.worker
  input = "Run the steps."
}
`

// TestAlwaysKeptOnResume: always and never answered at apply's prompt
// are recorded in the state with the run, shown by agentctl show, and
// decide the tool's later calls of the run also in a later apply that
// resumes it, one without a terminal: nothing is asked again, and each
// call so decided still gets its own approval entry.
func TestAlwaysKeptOnResume(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(alwaysPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	p := h.startOn(slave, []string{"USER=carol"}, "apply", "-auto-approve", "-no-color")
	out := p.out
	answer := func(n int, text string) {
		h.waitUntil(fmt.Sprintf("question %d", n), func() bool { return strings.Count(out.String(), "Approve?") >= n })
		if _, err := master.WriteString(text + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	answer(1, "always")            // touch A, and exec_command from now on
	answer(2, "never: no patches") // P1, and apply_patch from now on
	answer(3, "")                  // stamp: deferred (touch B was not asked)
	if code := p.wait(t); code != 0 {
		t.Fatalf("apply exited %d:\n%s", code, out)
	}
	if n := strings.Count(out.String(), "Approve?"); n != 3 {
		t.Fatalf("asked %d times, want 3:\n%s", n, out)
	}
	if !strings.Contains(out.String(), "rejected; so is every later call of apply_patch in run.job, also after it resumes (agentctl reject run.job -tool apply_patch -revoke takes that back).") {
		t.Errorf("never is not acknowledged:\n%s", out)
	}
	r := h.readState().Runs["run.job"]
	if r.Status != state.RunAwaitingApproval {
		t.Fatalf("status %s:\n%s", r.Status, out)
	}
	// Read as JSON, as a program reading the state would.
	var shown struct {
		Run struct {
			ToolDecisions map[string]struct {
				Decision  string `json:"decision"`
				DecidedBy string `json:"decided_by"`
				DecidedAt string `json:"decided_at"`
				Reason    string `json:"reason"`
			} `json:"tool_decisions"`
		} `json:"run"`
	}
	if err := json.Unmarshal([]byte(h.mustRun("show", "-json", "run.job")), &shown); err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]string{"exec_command": "approved/carol/", "apply_patch": "rejected/carol/no patches"} {
		d := shown.Run.ToolDecisions[tool]
		if got := d.Decision + "/" + d.DecidedBy + "/" + d.Reason; got != want || d.DecidedAt == "" {
			t.Errorf("standing decision on %s: %q at %q, want %q", tool, got, d.DecidedAt, want)
		}
	}
	show := h.mustRun("show", "-no-color", "run.job")
	for _, want := range []string{"\nStanding decisions (", "\n  apply_patch rejected (never) by carol at ", ": no patches\n", "\n  exec_command approved (always) by carol at "} {
		if !strings.Contains(show, want) {
			t.Errorf("show does not list the standing decisions (%q):\n%s", want, show)
		}
	}

	// The stamp is approved; the next apply, without a terminal, resumes
	// the run: the standing decisions decide touch C and P2.
	h.mustRun("approve", "run.job", "call_worker_3_0")
	o := h.mustRun("apply", "-auto-approve", "-no-color")
	if strings.Contains(o, "Approve?") || strings.Contains(o, "Awaiting approval") {
		t.Errorf("the resumed run asked again:\n%s", o)
	}
	r = h.readState().Runs["run.job"]
	if r.Status != state.RunCompleted {
		t.Fatalf("status %s after resuming:\n%s", r.Status, o)
	}
	ws := h.workspace()
	for name, want := range map[string]bool{"A": true, "B": true, "C": true, "STAMPED": true, "P1": false, "P2": false} {
		_, err := os.Stat(filepath.Join(ws, name))
		if (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", name, err == nil, want)
		}
	}
	got := map[string]string{}
	for _, a := range r.Approvals {
		if _, dup := got[a.CallID]; dup {
			t.Errorf("%s has two approval entries", a.CallID)
		}
		got[a.CallID] = a.Decision + "/" + a.DecidedBy + "/" + a.Reason
	}
	want := map[string]string{
		"call_worker_0_0": "approved/carol/",
		"call_worker_1_0": "rejected/carol/no patches",
		"call_worker_2_0": "approved/carol/always approved for this run",
		"call_worker_4_0": "approved/carol/always approved for this run",
		"call_worker_5_0": "rejected/carol/always rejected for this run: no patches",
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %q, want %q", id, got[id], w)
		}
	}
	if !strings.HasPrefix(got["call_worker_3_0"], "approved/") {
		t.Errorf("the stamp: %q", got["call_worker_3_0"])
	}
	if show := h.mustRun("show", "-no-color", "run.job"); !strings.Contains(show, "← rejected by the reviewer: always rejected for this run: no patches") {
		t.Errorf("the model was not told why P2 was rejected:\n%s", show)
	}
}
