package daytona

import (
	"context"
	"os"
	"testing"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

// TestSandboxContract runs the sandbox contract's suite against the
// in-process fake of Daytona, which checks every request and response
// against the published specification. Its sandboxes are directories of
// this machine, one workspace root each.
func TestSandboxContract(t *testing.T) {
	e := newEnv(t)
	sandboxtest.TestSandbox(t, sandboxtest.Factory{
		Provider: e.p,
		Spec: func(t *testing.T, want sandbox.Spec) sandbox.Spec {
			if !want.Accounts.Empty() && os.Geteuid() != 0 {
				testenv.Missing(t, "the Daytona fake runs a user's commands with setpriv, which switches ids only as root")
			}
			return sandboxtest.NewSpec(want, e.fake.Root)
		},
		Leftovers: func(ctx context.Context, spec sandbox.Spec) ([]string, error) {
			list, err := e.p.Client().List(ctx, map[string]string{sandbox.LabelLineage: spec.Lineage})
			var ids []string
			for _, s := range list {
				if st := e.fake.State(s.ID); st != "destroyed" && st != "destroying" {
					ids = append(ids, "sandbox "+s.ID+" ("+st+")")
				}
			}
			return ids, err
		},
		PortsUnreachable: "the fake's preview links name no real host",
	})
}
