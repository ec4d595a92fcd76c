package daytona

import (
	"testing"

	"github.com/agentctl/agentctl/engine/tools/toolstest"
)

// BenchmarkWriteStdinRoundTrip: one line to cat in a PTY session (the fake) and
// back, through write_stdin:
//
//	go test ./providers/daytona -run '^$' -bench WriteStdinRoundTrip
func BenchmarkWriteStdinRoundTrip(b *testing.B) {
	toolstest.BenchWriteStdinRoundTrip(b, newEnv(b).create(b))
}
