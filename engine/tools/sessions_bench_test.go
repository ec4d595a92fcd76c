package tools_test

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/ttytest"
	"github.com/agentctl/agentctl/providers/local"
)

// BenchmarkWriteStdinRoundTrip: one line to cat on a terminal and back,
// through write_stdin, in a local sandbox:
//
//	go test ./engine/tools -run '^$' -bench WriteStdinRoundTrip
func BenchmarkWriteStdinRoundTrip(b *testing.B) {
	for _, iso := range []string{local.IsolationNamespaces, local.IsolationNone} {
		b.Run(iso, func(b *testing.B) {
			s := newShell(b, iso, tools.ExecOptions{}, 0)
			if _, err := s.exec.Call(context.Background(), `{"cmd": "cat", "tty": true, "yield_time_ms": 0}`); err != nil {
				b.Fatal(err)
			}
			ttytest.BenchRoundTrip(b, ttytest.Session1(func(ctx context.Context, args string) (string, error) {
				o, err := s.write.Call(ctx, args)
				return o.Text, err
			}))
		})
	}
}
