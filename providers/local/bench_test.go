package local_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/agentctl/agentctl/engine/sandbox"
	"github.com/agentctl/agentctl/providers/local"
)

// BenchmarkExecTrue compares one exec round trip of `true` in a sandbox
// (namespaced and unisolated) with a plain fork/exec of `true`.
func BenchmarkExecTrue(b *testing.B) {
	b.Run("os-exec", func(b *testing.B) {
		prog, err := exec.LookPath("true")
		if err != nil {
			b.Skip(err)
		}
		for b.Loop() {
			if err := exec.Command(prog).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, iso := range []string{local.IsolationNone, local.IsolationNamespaces} {
		b.Run("sandbox-"+iso, func(b *testing.B) {
			if iso == local.IsolationNamespaces {
				requireNamespaces(b)
			}
			sb, _ := newSandbox(b, local.Options{Isolation: iso}, sandbox.Spec{})
			ctx := context.Background()
			req := sandbox.ExecRequest{Argv: []string{"true"}}
			for b.Loop() {
				res, err := sb.Exec(ctx, req)
				if err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
			}
		})
	}
}
