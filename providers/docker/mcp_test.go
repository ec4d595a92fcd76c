package docker

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/mcphost"
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
