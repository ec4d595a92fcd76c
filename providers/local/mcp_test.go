package local_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/mcphost"
	"github.com/agentctl/agentctl/engine/tools/toolstest"
	"github.com/agentctl/agentctl/internal/mcptest"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// everythingIn copies the go-sdk's everything server into a new sandbox
// of isolation iso and connects to it there; mark (KEY=VALUE) is in the
// server's environment.
func everythingIn(tb testing.TB, iso, mark string, log *testfiles.SyncBuffer) *mcphost.Session {
	tb.Helper()
	sb, _ := newSandbox(tb, local.Options{Isolation: iso}, sandbox.Spec{})
	k, v, _ := strings.Cut(mark, "=")
	var w io.Writer
	if log != nil {
		w = log
	}
	return toolstest.EverythingIn(tb, sb, map[string]string{k: v}, w)
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
