package local_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
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
	// Reference: util-linux unshare creating the same namespaces (without
	// building a root), to show what the kernel alone costs.
	b.Run("unshare-reference", func(b *testing.B) {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			b.Skip(err)
		}
		requireNamespaces(b)
		for b.Loop() {
			if err := exec.Command(unshare, "-Urmnipuf", "--mount-proc", "true").Run(); err != nil {
				b.Skip("unshare cannot create the namespaces here:", err)
			}
		}
	})
	for _, tc := range []struct{ name, iso, network, exe string }{
		{"sandbox-none", local.IsolationNone, "", ""},
		{"sandbox-namespaces", local.IsolationNamespaces, "", ""},
		// The same without a new network namespace, to show its share.
		{"sandbox-namespaces-hostnet", local.IsolationNamespaces, "host", ""},
		// With the sandbox init being another binary, e.g. agentctl itself
		// (its larger memory makes each fork dearer than the test binary's).
		{"sandbox-namespaces-exe", local.IsolationNamespaces, "", os.Getenv("AGENTCTL_BENCH_EXECUTABLE")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.name == "sandbox-namespaces-exe" && tc.exe == "" {
				b.Skip("set AGENTCTL_BENCH_EXECUTABLE to an agentctl binary")
			}
			if tc.iso == local.IsolationNamespaces {
				requireNamespaces(b)
			}
			sb, _ := newSandbox(b, local.Options{Isolation: tc.iso, Executable: tc.exe}, sandbox.Spec{Network: tc.network})
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
