// Package toolstest drives the agent tools against a provider's sandbox
// the same way in every provider's tests and benchmarks. Used by tests
// only.
package toolstest

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/mcphost"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/mcptest"
	"github.com/agentctl/agentctl/internal/ttytest"
	"github.com/agentctl/agentctl/sandbox"
)

// BenchWriteStdinRoundTrip measures write_stdin round trips to cat
// running on a terminal of sb, started with exec_command as session 1
// (ttytest.BenchRoundTrip).
func BenchWriteStdinRoundTrip(b *testing.B, sb sandbox.Sandbox) {
	b.Helper()
	sessions := tools.NewSessions(0)
	defer sessions.Close()
	ws := &sandbox.Workspace{Sandbox: sb, Address: "sandbox.bench"}
	if _, err := tools.NewExecCommand(ws, tools.ExecOptions{}, sessions).Call(context.Background(), `{"cmd": "cat", "tty": true, "yield_time_ms": 0}`); err != nil {
		b.Fatal(err)
	}
	write := tools.NewWriteStdin(sessions, tools.ExecOptions{})
	ttytest.BenchRoundTrip(b, ttytest.Session1(func(ctx context.Context, args string) (string, error) {
		o, err := write.Call(ctx, args)
		return o.Text, err
	}))
}

// EverythingIn copies the MCP go-sdk's everything server (built by
// mcptest.Server) into sb as bin/everything and connects to it there,
// over sandbox.ProcessStarter, with env in its environment and its
// stderr to log (nil: discarded). The session is closed when tb ends.
func EverythingIn(tb testing.TB, sb sandbox.Sandbox, env map[string]string, log io.Writer) *mcphost.Session {
	tb.Helper()
	data, err := os.ReadFile(mcptest.Server(tb, "everything"))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "bin/everything", data, 0o755); err != nil {
		tb.Fatal(err)
	}
	ws := &sandbox.Workspace{Sandbox: sb, Address: "sandbox.test", Env: env}
	s, err := mcphost.Connect(ctx, mcphost.Server{Name: "ev", Command: []string{"bin/everything"}, Workspace: ws, Timeout: time.Minute, Log: log})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
