package docker

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

// TestSandboxContract runs the sandbox contract's suite against the
// Docker Engine, with the test image (and, for manifest users, the image
// with account tools).
func TestSandboxContract(t *testing.T) {
	p := testProvider(t)
	sandboxtest.TestSandbox(t, sandboxtest.Factory{
		Provider: p,
		Spec: func(t *testing.T, want sandbox.Spec) sandbox.Spec {
			spec := testSpec(t)
			spec.Accounts, spec.Ports = want.Accounts, want.Ports
			if !want.Accounts.Empty() {
				buildShadowImage(t, p)
				spec.Image = shadowImage
			}
			if len(want.Ports) > 0 {
				// Docker publishes ports only from a container network.
				spec.Network = "bridge"
			}
			return spec
		},
		Leftovers: func(ctx context.Context, spec sandbox.Spec) ([]string, error) {
			list, err := p.ListManaged(ctx, spec.Lineage)
			var ids []string
			for _, c := range list {
				ids = append(ids, "container "+c.ID)
			}
			return ids, err
		},
	})
}
