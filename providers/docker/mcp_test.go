package docker

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/mcphost"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/mcptest"
	"github.com/agentctl/agentctl/internal/ttytest"
	"github.com/agentctl/agentctl/sandbox"
)

// TestMCPServerInContainer runs the go-sdk's everything server inside a
// container through StartProcess (an exec with attached stdin): listed,
// called, and gone from the container once closed.
func TestMCPServerInContainer(t *testing.T) {
	bin := mcptest.Server(t, "everything")
	sb := newSandbox(t, testSpec(t))
	ctx := context.Background()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "bin/everything", data, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := &sandbox.Workspace{Sandbox: sb, Address: "sandbox.test"}
	s, err := mcphost.Connect(ctx, mcphost.Server{Name: "ev", Command: []string{"bin/everything"}, Workspace: ws, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Call(ctx, "greet", `{"name":"container"}`)
	if err != nil || out.Text != "Hi container" {
		t.Fatalf("greet in the container: %q, %v", out.Text, err)
	}
	const count = `grep -l "bin/everythin[g]" /proc/[0-9]*/cmdline 2>/dev/null | wc -l`
	if n := strings.TrimSpace(execOK(t, sb, count)); n == "0" {
		t.Fatal("no server process in the container while the session is open")
	}
	s.Close()
	deadline := time.Now().Add(15 * time.Second)
	for strings.TrimSpace(execOK(t, sb, count)) != "0" {
		if time.Now().After(deadline) {
			t.Fatal("the server still runs in the container after Close")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStartProcessOnATerminal drives busybox sh on an exec's terminal.
func TestStartProcessOnATerminal(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	p, err := sb.StartProcess(context.Background(), sandbox.ProcessRequest{Argv: []string{"sh", "-i"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	ttytest.DriveShell(t, p)
}

// TestSessionsInContainer drives busybox sh on a terminal through
// exec_command and write_stdin, polls a long command to completion, and
// leaves no session process in the container once the sessions close.
func TestSessionsInContainer(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	ctx := context.Background()
	ws := &sandbox.Workspace{Sandbox: sb, Address: "sandbox.test"}
	sessions := tools.NewSessions(0)
	defer sessions.Close()
	exec := tools.NewExecCommand(ws, tools.ExecOptions{Root: "/workspace"}, sessions)
	write := tools.NewWriteStdin(sessions, tools.ExecOptions{})
	call := func(tl tools.Tool, args string) string {
		t.Helper()
		out, err := tl.Call(ctx, args)
		if err != nil {
			t.Fatalf("%s %s: %v", tl.Definition().Name, args, err)
		}
		return out.Text
	}
	if out := call(exec, `{"cmd": "sh", "tty": true, "yield_time_ms": 300}`); !strings.Contains(out, "Process running with session ID 1") {
		t.Fatalf("starting sh:\n%s", out)
	}
	got := call(write, `{"session_id": 1, "chars": "echo product-$((6*7))\n", "yield_time_ms": 1000}`)
	for i := 0; !strings.Contains(got, "product-42") && i < 50; i++ {
		got += call(write, `{"session_id": 1, "yield_time_ms": 200}`)
	}
	if !strings.Contains(got, "product-42") {
		t.Fatalf("the REPL did not answer:\n%s", got)
	}
	out := call(exec, `{"cmd": "echo begun; sleep 1; echo ended", "yield_time_ms": 100}`)
	if !strings.Contains(out, "Process running with session ID 2") {
		t.Fatalf("the long command:\n%s", out)
	}
	for i := 0; !strings.Contains(out, "Process exited with code 0") && i < 100; i++ {
		out += call(write, `{"session_id": 2, "yield_time_ms": 200}`)
	}
	if !strings.Contains(out, "ended") || !strings.Contains(out, "Process exited with code 0") {
		t.Fatalf("polling the long command:\n%s", out)
	}
	call(exec, `{"cmd": "sleep 301", "yield_time_ms": 0}`)
	const count = `grep -l "30[1]" /proc/[0-9]*/cmdline 2>/dev/null | wc -l`
	// The exec starts a moment after the call returned (yield_time_ms 0).
	deadline := time.Now().Add(15 * time.Second)
	for strings.TrimSpace(execOK(t, sb, count)) == "0" {
		if time.Now().After(deadline) {
			t.Fatal("no session process in the container while it runs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	sessions.Close()
	deadline = time.Now().Add(15 * time.Second)
	for strings.TrimSpace(execOK(t, sb, count)) != "0" {
		if time.Now().After(deadline) {
			t.Fatal("a session process is left in the container after Close")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
