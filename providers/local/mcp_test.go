package local_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/mcphost"
	"github.com/agentctl/agentctl/internal/mcptest"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/internal/ttytest"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// everythingIn copies the go-sdk's everything server into a new sandbox
// of isolation iso and connects to it there; mark (KEY=VALUE) is in the
// server's environment.
func everythingIn(tb testing.TB, iso, mark string, log *testfiles.SyncBuffer) *mcphost.Session {
	tb.Helper()
	bin := mcptest.Server(tb, "everything")
	sb, _ := newSandbox(tb, local.Options{Isolation: iso}, sandbox.Spec{})
	ctx := context.Background()
	data, err := os.ReadFile(bin)
	if err != nil {
		tb.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "bin/everything", data, 0o755); err != nil {
		tb.Fatal(err)
	}
	k, v, _ := strings.Cut(mark, "=")
	ws := &sandbox.Workspace{Sandbox: sb, Address: "sandbox.test", Env: map[string]string{k: v}}
	srv := mcphost.Server{Name: "ev", Command: []string{"bin/everything"}, Workspace: ws, Timeout: time.Minute}
	if log != nil {
		srv.Log = log
	}
	s, err := mcphost.Connect(ctx, srv)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// TestMCPServerInSandbox runs the go-sdk's everything server inside the
// sandbox through StartProcess: listed, called, and gone once closed.
func TestMCPServerInSandbox(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		mark := "MCP_MARK=" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
		s := everythingIn(t, iso, mark, &testfiles.SyncBuffer{})
		out, err := s.Call(context.Background(), "greet", `{"name":"sandbox"}`)
		if err != nil || out.Text != "Hi sandbox" {
			t.Fatalf("greet in the sandbox: %q, %v", out.Text, err)
		}
		if mcptest.ProcessesWithEnv(mark) == 0 {
			t.Fatal("no process carries the server's environment: is it running elsewhere?")
		}
		if err := s.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		mcptest.AwaitNoProcesses(t, mark, "the server after Close")
	})
}

// TestStartProcessOnATerminal drives an interactive shell on the
// sandbox's pseudo-terminal.
func TestStartProcessOnATerminal(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		p, err := sb.StartProcess(context.Background(), sandbox.ProcessRequest{Argv: []string{"sh", "-i"}, TTY: true})
		if err != nil {
			t.Fatal(err)
		}
		ttytest.DriveShell(t, p)
	})
}
