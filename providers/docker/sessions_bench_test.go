package docker

import (
	"testing"

	"github.com/agentctl/agentctl/engine/tools/toolstest"
)

// BenchmarkWriteStdinRoundTrip: one line to cat on an exec's terminal and
// back, through write_stdin:
//
//	AGENTCTL_TEST_DOCKER=1 go test ./providers/docker -run '^$' -bench WriteStdinRoundTrip
func BenchmarkWriteStdinRoundTrip(b *testing.B) {
	toolstest.BenchWriteStdinRoundTrip(b, newSandbox(b, testSpec(b)))
}
