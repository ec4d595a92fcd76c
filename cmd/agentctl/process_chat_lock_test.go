//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/state"
)

// chatLockConfig is the pipeline (run.job in sandbox.box) with an agent
// to chat with in the same sandbox: its first turn answers, its second
// reads the last line the pipeline wrote.
func chatLockConfig() string {
	return strings.Replace(pipelineConfig(), "provider \"scripted\" {\n", `provider "scripted" {
  script "chatter" {
    reply { text = "first answer" }
    reply {
      call "exec_command" {
        arguments = { cmd = "tail -n 1 log.txt" }
      }
    }
    reply { text = "second answer" }
  }
`, 1) + `
agent "chatter" {
  provider     = provider.scripted
  instructions = "Chat."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}
`
}

// TestChatLockPerTurn: an open chat holds the state lock only while a
// turn runs. While it waits for its next line, an apply in the same
// directory succeeds; a turn typed while another apply holds the lock
// says it waits (naming the apply), then runs once the apply is done, on
// the state and sandbox the apply left, and writes nothing over them.
func TestChatLockPerTurn(t *testing.T) {
	for _, jsonOut := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonOut), func(t *testing.T) {
			h := newHarness(t)
			if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(chatLockConfig()), 0o644); err != nil {
				t.Fatal(err)
			}
			chatBetweenApplies(t, h, jsonOut, h.readState)
		})
	}
}

// TestPGChatLockPerTurn is TestChatLockPerTurn with the pg backend,
// where one open chat used to block every teammate's apply.
func TestPGChatLockPerTurn(t *testing.T) {
	block, open := pgBackend(t)
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(block+chatLockConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	h.mustRun("init", "-no-color")
	chatBetweenApplies(t, h, false, func() *state.State {
		st, err := open(h.stateDir()).Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func chatBetweenApplies(t *testing.T, h *harness, jsonOut bool, read func() *state.State) {
	stdin, typed, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer typed.Close()
	args := []string{"chat", "-no-color", "agent.chatter"}
	if jsonOut {
		args = append(args, "-json")
	}
	chat := h.startOn(stdin, nil, args...)
	stdin.Close()
	say := func(line string) {
		t.Helper()
		if _, err := typed.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	// until waits for the chat to print want, failing at once if it
	// exited.
	until := func(what string, want ...string) {
		t.Helper()
		h.waitUntil(what, func() bool {
			select {
			case err := <-chat.done:
				chat.done <- err
				t.Fatalf("chat exited (%v) before %s:\n%s", err, what, chat.out)
			default:
			}
			out := chat.out.String()
			for _, w := range want {
				if strings.Contains(out, w) {
					return true
				}
			}
			return false
		})
	}
	say("hello")
	until("the first reply", "first answer")

	// Idle between turns: the chat holds no lock.
	if out, errOut, code := h.run("apply", "-auto-approve", "-no-color"); code != 0 || !strings.Contains(out, "Apply complete") {
		t.Fatalf("apply while the chat waits for a line: exit %d\n%s%s\nchat:\n%s", code, out, errOut, chat.out)
	}

	// A turn typed while an apply holds the lock waits for it.
	ws := localWorkspace(h)
	hold := filepath.Join(ws, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	apply := h.start("apply", "-auto-approve", "-no-color", "-replace=run.job")
	h.waitUntil("step 12 to start again", func() bool { return lastLoggedStep(ws) == holdStep })
	say("what is the last step?")
	until("the chat to say it waits", "Waiting for the state lock held by", `"type":"lock_waiting"`)
	out := chat.out.String()
	holder := fmt.Sprintf("PID %d) running \"apply\"", apply.cmd.Process.Pid)
	if jsonOut {
		holder = fmt.Sprintf(`"pid":%d`, apply.cmd.Process.Pid)
	}
	if !strings.Contains(out, holder) {
		t.Errorf("the waiting notice does not name the apply (%s):\n%s", holder, out)
	}
	if strings.Contains(out, "second answer") {
		t.Fatalf("the turn ran while the apply held the lock:\n%s", out)
	}
	// With -lock-timeout, a chat waits that long at most.
	if _, errOut, code := h.run("chat", "-no-color", "-lock-timeout=200ms", "-session", "other", "agent.chatter"); code != 1 ||
		!strings.Contains(errOut, "The session did not start: the state lock is still held after waiting 200ms (-lock-timeout) by") || !strings.Contains(errOut, "running \"apply\"") {
		t.Errorf("chat -lock-timeout=200ms while the apply holds the lock: exit %d\n%s", code, errOut)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if code := apply.wait(t); code != 0 {
		t.Fatalf("the held apply: exit %d\n%s", code, apply.out)
	}
	until("the second reply", "second answer")
	typed.Close()
	if code := chat.wait(t); code != 0 {
		t.Fatalf("chat: exit %d\n%s", code, chat.out)
	}
	if jsonOut {
		checkChatEvents(t, chat.out.String())
	}
	t.Logf("chat:\n%s", chat.out)

	// The turn ran on what the apply left, and wrote nothing over it.
	st := read()
	if r := st.Runs["run.job"]; r == nil || r.Status != "completed" {
		t.Fatalf("run.job after the chat: %+v", r)
	}
	if c := st.Chats["chat.default"]; c == nil || c.Turns != 2 {
		t.Fatalf("chat.default: %+v", c)
	}
	if show := h.mustRun("show", "-no-color", "chat.default"); !strings.Contains(show, fmt.Sprintf("→ step %d", pipelineSteps)) {
		t.Errorf("the second turn did not see the apply's last step:\n%s", show)
	}
}

// checkChatEvents checks that chat -json wrote only JSON events, with the
// wait for the lock among them.
func checkChatEvents(t *testing.T, out string) {
	t.Helper()
	types := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct{ Type string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type == "" {
			t.Fatalf("chat -json wrote a line that is not an event: %q (%v)", line, err)
		}
		types[ev.Type]++
	}
	for _, want := range []string{"version", "chat_opened", "lock_waiting", "lock_taken", "chat_reply", "tool_call"} {
		if types[want] == 0 {
			t.Errorf("chat -json wrote no %s event: %v", want, types)
		}
	}
}
