package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/mcphost"
	"github.com/agentctl/agentctl/internal/mcptest"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// TestMCPServerInSandbox runs the go-sdk's everything server inside the
// sandbox through StartProcess: listed, called, and gone once closed.
func TestMCPServerInSandbox(t *testing.T) {
	bin := mcptest.Server(t, "everything")
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		ctx := context.Background()
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.WriteFile(ctx, "bin/everything", data, 0o755); err != nil {
			t.Fatal(err)
		}
		mark := "MCP_MARK=" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
		ws := &sandbox.Workspace{Sandbox: sb, Address: "sandbox.test", Env: map[string]string{"MCP_MARK": strings.TrimPrefix(mark, "MCP_MARK=")}}
		var log strings.Builder
		s, err := mcphost.Connect(ctx, mcphost.Server{Name: "ev", Command: []string{"bin/everything"}, Workspace: ws, Timeout: 30 * time.Second, Log: &syncWriter{b: &log}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Call(ctx, "greet", `{"name":"sandbox"}`)
		if err != nil || out.Text != "Hi sandbox" {
			t.Fatalf("greet in the sandbox: %q, %v", out.Text, err)
		}
		if hostProcesses(mark) == 0 {
			t.Fatal("no process carries the server's environment: is it running elsewhere?")
		}
		if err := s.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		// No server process is left.
		deadline := time.Now().Add(10 * time.Second)
		for hostProcesses(mark) > 0 {
			if time.Now().After(deadline) {
				t.Fatal("the server still runs after Close")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// syncWriter serializes writes to b (the server's stderr is copied from
// another goroutine).
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// hostProcesses counts the host's processes whose environment holds
// entry.
func hostProcesses(entry string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, e := range strings.Split(string(b), "\x00") {
			if e == entry {
				n++
			}
		}
	}
	return n
}
