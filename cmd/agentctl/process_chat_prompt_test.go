//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const chatPromptConfig = `
provider "scripted" {
  script "worker" {
    reply {
      call "exec_command" {
        arguments = { cmd = "touch ONE" }
      }
    }
    reply { text = "Made ONE." }
    reply {
      call "exec_command" {
        arguments = { cmd = "touch TWO" }
      }
    }
    reply { text = "Could not make TWO." }
  }
}
provider "local" {}
sandbox "box" {
  provider = provider.local
}
capability "shell" "guarded" {
  needs_approval = true
}
agent "worker" {
  provider     = provider.scripted
  instructions = "Make files."
  sandbox      = sandbox.box
  capabilities = [capability.shell.guarded]
}
`

// TestChatInlineApproval: on a terminal, agentctl chat prompts for each
// line and asks about calls that need approval with apply's question; yes
// runs the call, no: REASON refuses it and the turn goes on.
func TestChatInlineApproval(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(chatPromptConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	p := h.startOn(slave, []string{"USER=carol"}, "chat", "-no-color", "agent.worker")
	out := p.out
	after := func(what string, n int, text string) {
		h.waitUntil(fmt.Sprintf("%s %d", what, n), func() bool { return strings.Count(out.String(), what) >= n })
		if _, err := master.WriteString(text + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	after("> ", 1, "make one")
	after("Approve?", 1, "yes")
	after("Made ONE.", 1, "make two")
	after("Approve?", 2, "no: not today")
	after("Could not make TWO.", 1, "/exit")
	if code := p.wait(t); code != 0 {
		t.Fatalf("chat exited %d:\n%s", code, out)
	}
	o := out.String()
	if !strings.Contains(o, "chat.default: agent.worker wants to call exec_command") {
		t.Errorf("the question does not name the session and the call:\n%s", o)
	}
	ws := h.workspace()
	for name, want := range map[string]bool{"ONE": true, "TWO": false} {
		_, err := os.Stat(filepath.Join(ws, name))
		if (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", name, err == nil, want)
		}
	}
	hist := h.mustRun("show", "chat.default")
	if !strings.Contains(hist, "rejected by the reviewer: not today") {
		t.Errorf("the refused call's output is not in the history:\n%s", hist)
	}
}
