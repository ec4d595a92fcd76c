package local_test

import (
	"context"
	"os"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

// knownBroken are the contract checks known to fail with each isolation,
// by name (sandboxtest.Check*), with the reason; none today (the
// terminal's name, issue 34 item 9, works since the PTY fix).
var knownBroken = map[string]map[string]string{}

// TestSandboxContract runs the sandbox contract's suite against both
// isolations.
func TestSandboxContract(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sandboxtest.TestSandbox(t, sandboxtest.Factory{
			Provider: local.New(local.Options{Isolation: iso}),
			Spec: func(t *testing.T, want sandbox.Spec) sandbox.Spec {
				want.Address = `sandbox.suite["` + t.Name() + `"]`
				want.Lineage = "suite-lineage"
				want.StateDir = t.TempDir()
				want.Root = "/workspace"
				if len(want.Ports) > 0 && iso == local.IsolationNamespaces {
					// Only a sandbox on the host's network has ports.
					want.Network = "host"
				}
				return want
			},
			Validate: func(spec sandbox.Spec, at sandboxtest.Ranges) hcl.Diagnostics {
				_, diags := local.DecodeSandbox(&registry.SandboxArgs{
					Address: spec.Address, Body: hcl.EmptyBody(), Provider: &local.ProviderSettings{Isolation: iso},
					Accounts: spec.Accounts, AccountsRange: at.Manifest.Ptr(), Ports: spec.Ports, PortsRange: at.Ports,
				})
				return diags
			},
			// A sandbox is a directory of the state directory, which
			// holds nothing else.
			Leftovers: func(_ context.Context, spec sandbox.Spec) ([]string, error) {
				ents, err := os.ReadDir(spec.StateDir)
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				return names, err
			},
			KnownBroken: knownBroken[iso],
		})
	})
}
