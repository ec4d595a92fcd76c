//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/state"
)

// openPTY opens a pseudo-terminal pair; it skips the test where there is
// none.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		testenv.Missing(t, "no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(); _ = s.Close() })
	go func() { _, _ = io.Copy(io.Discard, m) }() // the terminal's echo
	return m, s
}

const promptPipeline = `
provider "scripted" {
  script "worker" {
    reply {
      call "exec_command" {
        arguments = { cmd = "echo one > DANGEROUS" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "echo two > REJECTED" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "touch A" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "touch B" }
      }
    }
    reply {
      call "apply_patch" {
        arguments = { input = "*** Begin Patch\n*** Add File: LATER\n+later\n*** End Patch\n" }
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
  needs_approval = !can(regex("^ls", call.arguments.cmd))
}
capability "filesystem" "guarded" {
  needs_approval = true
}
agent "worker" {
  provider     = provider.scripted
  instructions = "Run the steps."
  sandbox      = sandbox.box
  capabilities = [capability.shell.guarded, capability.filesystem.guarded]
  max_turns    = 10
}
run "job" {
  agent = agent.worker
  input = "Run the steps."
}
`

// TestInlineApproval answers apply's questions on a terminal: yes runs
// the call, no: REASON tells the model, always approves the tool for the
// rest of the run without asking again, an empty answer defers.
func TestInlineApproval(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(promptPipeline), 0o644); err != nil {
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
	answer(1, "yes")
	answer(2, "no: not that file")
	answer(3, "always")
	answer(4, "") // apply_patch: another tool, asked; deferred
	if code := p.wait(t); code != 0 {
		t.Fatalf("apply exited %d:\n%s", code, out)
	}
	o := out.String()
	if n := strings.Count(o, "Approve?"); n != 4 {
		t.Errorf("asked %d times, want 4 (touch B was approved by always):\n%s", n, o)
	}
	if !strings.Contains(o, "run.job: agent.worker wants to call exec_command (call call_worker_0_0):\n  {\"cmd\":\"echo one > DANGEROUS\"}") {
		t.Errorf("the question does not show the call:\n%s", o)
	}
	if !strings.Contains(o, "run.job: Awaiting approval of 1 tool call(s)") {
		t.Errorf("the deferred call is not reported:\n%s", o)
	}
	ws := h.workspace()
	for name, want := range map[string]bool{"DANGEROUS": true, "REJECTED": false, "A": true, "B": true, "LATER": false} {
		_, err := os.Stat(filepath.Join(ws, name))
		if (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", name, err == nil, want)
		}
	}
	r := h.readState().Runs["run.job"]
	if r.Status != state.RunAwaitingApproval {
		t.Fatalf("status %s", r.Status)
	}
	got := map[string]string{}
	for _, a := range r.Approvals {
		got[a.CallID] = a.Decision + "/" + a.DecidedBy + "/" + a.Reason
	}
	want := map[string]string{
		"call_worker_0_0": "approved/carol/",
		"call_worker_1_0": "rejected/carol/not that file",
		"call_worker_2_0": "approved/carol/",
		"call_worker_3_0": "approved/carol/always approved for this run",
		"call_worker_4_0": "//",
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %q, want %q", id, got[id], w)
		}
	}

	// -input=false defers without asking, even on a terminal.
	cmd := h.command("apply", "-auto-approve", "-no-color", "-input=false")
	out2 := &testfiles.SyncBuffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, out2, out2
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v:\n%s", err, out2)
	}
	if strings.Contains(out2.String(), "Approve?") || !strings.Contains(out2.String(), "Awaiting approval") {
		t.Errorf("-input=false:\n%s", out2)
	}
	h.mustRun("approve", "run.job", "-all")
	h.mustRun("apply", "-auto-approve", "-no-color")
	if r := h.readState().Runs["run.job"]; r.Status != state.RunCompleted {
		t.Fatalf("status %s after approving", r.Status)
	}
}

// TestKilledAtApprovalPrompt: agentctl killed (kill -9) while it waits
// for an answer at the approval prompt loses nothing and runs nothing:
// the call did not run, the next apply without a terminal defers it, and
// once approved it runs.
func TestKilledAtApprovalPrompt(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(promptPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	_, slave := openPTY(t)
	p := h.startOn(slave, nil, "apply", "-auto-approve", "-no-color")
	out := p.out
	h.waitUntil("the approval question", func() bool { return strings.Contains(out.String(), "Approve?") })
	p.kill(t)
	ws := h.workspace()
	if _, err := os.Stat(filepath.Join(ws, "DANGEROUS")); err == nil {
		t.Fatal("DANGEROUS written while its approval was being asked")
	}
	if r := h.readState().Runs["run.job"]; r == nil || r.Status == state.RunCompleted {
		t.Fatalf("run.job after the kill: %+v", r)
	}

	o := h.mustRun("apply", "-auto-approve", "-no-color", "-input=false")
	r := h.readState().Runs["run.job"]
	if r.Status != state.RunAwaitingApproval || len(r.Pending()) != 1 || r.Pending()[0].CallID != "call_worker_0_0" {
		t.Fatalf("after the kill, apply -input=false left run.job %s with %+v:\n%s", r.Status, r.Pending(), o)
	}
	h.mustRun("approve", "run.job", "call_worker_0_0")
	o = h.mustRun("apply", "-auto-approve", "-no-color", "-input=false")
	if _, err := os.Stat(filepath.Join(ws, "DANGEROUS")); err != nil {
		t.Fatalf("the approved call did not run: %v\n%s", err, o)
	}
	if r := h.readState().Runs["run.job"]; r.Status != state.RunAwaitingApproval || r.Pending()[0].CallID != "call_worker_1_0" {
		t.Fatalf("run.job did not go on to the next guarded call: %s %+v", r.Status, r.Pending())
	}
}

// TestConfirmOnTerminal: on a terminal, apply shows the plan and asks for
// "yes"; another answer cancels before anything runs, "yes" applies.
func TestConfirmOnTerminal(t *testing.T) {
	h := newHarness(t)
	cfg := `
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
agent "a" { provider = provider.scripted }
run "r" {
  agent = agent.a
  input = "go"
}
`
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	for _, c := range []struct {
		answer, want string
		code         int
	}{
		{"no", "Apply cancelled.", 1},
		{"yes", "Apply complete!", 0},
	} {
		p := h.startOn(slave, nil, "apply", "-no-color")
		h.waitUntil("the question", func() bool { return strings.Contains(p.out.String(), "Enter a value") })
		if !strings.Contains(p.out.String(), "# run.r will be") {
			t.Fatalf("asked before showing the plan:\n%s", p.out)
		}
		if _, err := master.WriteString(c.answer + "\n"); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t); code != c.code || !strings.Contains(p.out.String(), c.want) {
			t.Fatalf("answered %q: exit %d, want %d and %q:\n%s", c.answer, code, c.code, c.want, p.out)
		}
		ran := h.readState().Runs["run.r"] != nil
		if ran != (c.answer == "yes") {
			t.Fatalf("answered %q: run.r recorded = %v", c.answer, ran)
		}
	}
}
