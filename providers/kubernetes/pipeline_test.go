package kubernetes

// Engine-level acceptance tests: the real agentctl binary, built here,
// applies configurations that use provider "kubernetes" against the test
// cluster, and the tests check what a user would see. What every provider
// must do is sandboxtest's (TestSandboxContract).

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/clitest"
	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/internal/testfiles"
)

var agentctlBin clitest.Binary

// agentctlBinary builds cmd/agentctl once per test binary.
func agentctlBinary(t *testing.T) string { return agentctlBin.Path(t) }

// examples/kubernetes.hcl applied as a user would, once straight through
// and once killed with SIGKILL during its long step (clitest.Analyst).
func TestKubernetesExampleResumeAfterKill(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	example, err := os.ReadFile("../../examples/kubernetes.hcl")
	if err != nil {
		t.Fatal(err)
	}
	clitest.Analyst{
		New: func() *clitest.CLI {
			dir := t.TempDir()
			testfiles.WriteTree(t, dir, map[string]string{"kubernetes.hcl": string(example)})
			cl := &clitest.CLI{T: t, Bin: agentctlBinary(t), Dir: dir, File: "kubernetes.hcl", Timeout: 4 * time.Minute,
				Env: []string{"AGENTCTL_VAR_image=" + k8stest.Image, "AGENTCTL_VAR_namespace=" + c.ns, "KUBECONFIG=" + c.kubeconfig}}
			t.Cleanup(func() {
				if st := cl.State(); st != nil && len(st.Sandboxes) > 0 {
					cl.Run("destroy", "-auto-approve", cl.File)
				}
			})
			return cl
		},
		Left: func(lineage string) []string {
			left, err := c.leftovers(context.Background(), lineage)
			if err != nil {
				t.Fatal(err)
			}
			return left
		},
	}.ApplyResumeAfterKill(t)
}
