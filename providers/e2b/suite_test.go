package e2b

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

// TestSandboxContract runs the sandbox contract's suite against the
// in-process fake of E2B's control plane and envd, which checks every
// exchange against the vendored documents. Its sandboxes are directories
// of this machine, one workspace root each.
func TestSandboxContract(t *testing.T) {
	e := newEnv(t)
	sandboxtest.TestSandbox(t, sandboxtest.Factory{
		Provider: e.p,
		Spec: func(t *testing.T, want sandbox.Spec) sandbox.Spec {
			spec := sandboxtest.NewSpec(want, e.fake.Root)
			spec.Network = "none"
			return spec
		},
		Leftovers: func(_ context.Context, spec sandbox.Spec) ([]string, error) {
			var left []string
			for _, id := range e.fake.IDs() {
				if md, _ := e.fake.Created(id)["metadata"].(map[string]any); md[sandbox.LabelLineage] == spec.Lineage {
					left = append(left, "sandbox "+id)
				}
			}
			return left, nil
		},
		HTTPClient: e.fake.Client(),
	})
}
