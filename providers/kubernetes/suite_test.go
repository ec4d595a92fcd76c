package kubernetes

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

// TestSandboxContract runs the sandbox contract's suite against the test
// cluster, in a namespace of its own, with the test image (and, for
// manifest users, the image with account tools).
func TestSandboxContract(t *testing.T) {
	c := testCluster(t)
	sandboxtest.TestSandbox(t, sandboxtest.Factory{
		Provider: c.p,
		Spec: func(t *testing.T, want sandbox.Spec) sandbox.Spec {
			spec := testSpec(t)
			spec.Accounts, spec.Ports = want.Accounts, want.Ports
			if !want.Accounts.Empty() {
				spec.Image = k8stest.UsersImage
			}
			return spec
		},
		Leftovers: func(ctx context.Context, spec sandbox.Spec) ([]string, error) {
			return c.leftovers(ctx, spec.Lineage)
		},
	})
}
