package runloop_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/providers/runloop"
	"github.com/agentctl/agentctl/providers/runloop/runloopfake"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

// TestSandboxContract runs the sandbox contract's suite against the
// in-process fake of Runloop's API, which checks every exchange against
// the API document. Each devbox has a disk of its own at the fake's
// root, beneath which every sandbox gets a workspace root of its own;
// the fake's client reaches a devbox's ports through its tunnel's URL.
func TestSandboxContract(t *testing.T) {
	f := runloopfake.New(t)
	p, err := runloop.New(runloop.Options{APIKey: f.APIKey, BaseURL: f.URL(), Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.TestSandbox(t, sandboxtest.Factory{
		Provider: p,
		Spec: func(t *testing.T, want sandbox.Spec) sandbox.Spec {
			return sandboxtest.NewSpec(want, f.Root)
		},
		Validate: func(spec sandbox.Spec, at sandboxtest.Ranges) hcl.Diagnostics {
			_, diags := runloop.DecodeSandbox(&registry.SandboxArgs{
				Address: spec.Address, Body: hcl.EmptyBody(),
				Accounts: spec.Accounts, AccountsRange: at.Manifest.Ptr(), Ports: spec.Ports, PortsRange: at.Ports,
			})
			return diags
		},
		Leftovers: func(ctx context.Context, spec sandbox.Spec) ([]string, error) {
			var left []string
			for _, id := range f.Live() {
				if md, _ := f.Devbox(id)["metadata"].(map[string]any); md[sandbox.LabelLineage] == spec.Lineage {
					left = append(left, "devbox "+id+" ("+f.Status(id)+")")
				}
			}
			return left, nil
		},
		HTTPClient: f.Client(),
	})
}
