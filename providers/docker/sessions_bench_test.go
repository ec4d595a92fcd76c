package docker

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/ttytest"
	"github.com/agentctl/agentctl/sandbox"
)

// BenchmarkWriteStdinRoundTrip: one line to cat on an exec's terminal and
// back, through write_stdin:
//
//	AGENTCTL_TEST_DOCKER=1 go test ./providers/docker -run '^$' -bench WriteStdinRoundTrip
func BenchmarkWriteStdinRoundTrip(b *testing.B) {
	sb := newSandbox(b, testSpec(b))
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
