package local_test

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// BenchmarkMCPCallVsExec compares one MCP tool call to a server running
// in the sandbox (the go-sdk's everything server, greet) with a direct
// exec of the same work (echo Hi NAME) in the same sandbox:
//
//	go test ./providers/local -run '^$' -bench MCPCallVsExec -count 3
func BenchmarkMCPCallVsExec(b *testing.B) {
	for _, iso := range isolations {
		b.Run(iso, func(b *testing.B) {
			if iso == local.IsolationNamespaces {
				requireNamespaces(b)
			}
			s := everythingIn(b, iso, "MCP_MARK=bench", nil)
			sb, _ := newSandbox(b, local.Options{Isolation: iso}, sandbox.Spec{})
			ctx := context.Background()
			b.Run("mcp", func(b *testing.B) {
				for b.Loop() {
					if out, err := s.Call(ctx, "greet", `{"name":"bench"}`); err != nil || out.Text != "Hi bench" {
						b.Fatalf("%q, %v", out.Text, err)
					}
				}
			})
			b.Run("exec", func(b *testing.B) {
				for b.Loop() {
					res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"echo", "Hi", "bench"}})
					if err != nil || string(res.Stdout) != "Hi bench\n" {
						b.Fatalf("%+v, %v", res, err)
					}
				}
			})
		})
	}
}
