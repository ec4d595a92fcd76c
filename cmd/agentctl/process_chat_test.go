package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/state"
)

const chatCrashConfig = `provider "openai" {
  max_retries = 20
}

provider "local" { isolation = "none" }

sandbox "box" {
  provider = provider.local
}

capability "shell" "default" {}

agent "worker" {
  model        = "gpt-test"
  instructions = "Help."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}
`

// TestChatKilledMidTurnResumes: agentctl chat is killed (SIGKILL) while
// its turn's second model call is being retried, after the turn's tool
// call ran. The next chat of the session resumes the turn from its last
// checkpoint: the tool does not run again, the model call is made with
// its output, and the reply is printed.
func TestChatKilledMidTurnResumes(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var failed atomic.Int32
	srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		switch {
		case functionOutputs(r) == 0:
			return fakeopenai.Calls(fakeopenai.FunctionCall("call_1", "exec_command", `{"cmd":"echo ran >> log.txt"}`))
		case failing.Load():
			failed.Add(1)
			return fakeopenai.Status(503, "Retry-After", "60")
		}
		return fakeopenai.Text("The command ran.")
	}))
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(chatCrashConfig), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := h.command("chat", "-no-color", "agent.worker")
	cmd.Stdin = strings.NewReader("run it\n")
	out := &testfiles.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: out, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	h.waitUntil("the turn's second model call to fail", func() bool { return failed.Load() >= 1 })
	p.kill(t)

	st := h.readState()
	c := st.Chats["chat.default"]
	if c == nil || c.Status != state.ChatRunning || c.Input != "run it" {
		t.Fatalf("chat.default after kill -9: %+v, want a running turn", c)
	}

	failing.Store(false)
	resume := h.command("chat", "-no-color", "agent.worker")
	resume.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	resume.Stdout, resume.Stderr = &stdout, &stderr
	if err := resume.Run(); err != nil {
		t.Fatalf("chat after kill -9: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	if !strings.Contains(stderr.String(), `Resuming the unfinished turn "run it"`) {
		t.Errorf("stderr lacks the resume notice:\n%s", &stderr)
	}
	if !strings.Contains(stdout.String(), "The command ran.") {
		t.Errorf("stdout lacks the resumed turn's reply:\n%s", &stdout)
	}
	st = h.readState()
	if n := strings.Count(readFile(t, filepath.Join(h.workspace(), "log.txt")), "ran"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	c = st.Chats["chat.default"]
	if c == nil || c.Status != state.ChatIdle || c.Turns != 1 {
		t.Fatalf("chat.default after the resume: %+v", c)
	}
	reqs := srv.Requests()
	if last := reqs[len(reqs)-1]; functionOutputs(last) != 1 {
		t.Errorf("the resumed model call carries %d tool outputs, want 1", functionOutputs(last))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
