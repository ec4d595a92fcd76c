package docker

// Engine-level acceptance tests: the real agentctl binary, built here with
// go build, applies configurations that use provider "docker" with the
// test image, and the tests check what a user would see (plan text, state,
// agentctl exec output, the containers the engine leaves). What every
// provider must do is sandboxtest's (TestSandboxContract).

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/cmd/agentctl/clitest"
	"github.com/agentctl/agentctl/internal/testfiles"

	"github.com/moby/moby/client"
)

var agentctlBin clitest.Binary

// agentctlBinary builds cmd/agentctl once per test binary.
func agentctlBinary(t *testing.T) string { return agentctlBin.Path(t) }

func removeBinary() { agentctlBin.Remove() }

// cli runs agentctl in one configuration directory.
type cli struct{ *clitest.CLI }

func newCLI(t *testing.T, dir, file string, env ...string) *cli {
	return &cli{&clitest.CLI{T: t, Bin: agentctlBinary(t), Dir: dir, File: file, Env: env}}
}

// destroyOnCleanup destroys what the configuration created at the end of
// the test and removes any container of its lineage that is left.
func (c *cli) destroyOnCleanup(p *Provider) {
	c.T.Cleanup(func() {
		st := c.State()
		if st == nil {
			return
		}
		if len(st.Sandboxes) > 0 {
			c.Run("destroy", "-auto-approve", c.File)
		}
		ctx := context.Background()
		list, _ := p.ListManaged(ctx, st.Lineage)
		for _, m := range list {
			_, _ = p.Client().ContainerRemove(ctx, m.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	})
}

// removeAndRestore removes the container id of the sandbox at addr behind
// agentctl's back; plan must say restore with nothing to run, and apply
// restores it without running anything.
func removeAndRestore(t *testing.T, p *Provider, c *cli, addr, id string) {
	t.Helper()
	if _, err := p.Client().ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	out, code := c.Run("plan", "-detailed-exitcode", c.File)
	if code != 2 {
		t.Fatalf("plan after removal: exit %d\n%s", code, out)
	}
	mustContain(t, "plan after removal", out, "# "+addr+" will be restored from its snapshot", "Plan: 1 to create, 0 to change, 0 to destroy; 0 runs to execute, 0 to resume.")
	out = c.OK("apply", "-auto-approve", c.File)
	mustContain(t, "restore apply", out, "0 runs executed, 0 resumed")
	if strings.Contains(out, "Executing...") {
		t.Fatalf("the restore apply ran something:\n%s", out)
	}
}

func mustContain(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("%s: missing %q in:\n%s", what, w, out)
		}
	}
}

// examples/docker-offline.hcl, applied as a user would, once straight
// through and once killed with SIGKILL during its long step
// (clitest.Analyst).
func TestDockerOfflineExampleResumeAfterKill(t *testing.T) {
	p := testProvider(t)
	example, err := os.ReadFile("../../examples/docker-offline.hcl")
	if err != nil {
		t.Fatal(err)
	}
	clitest.Analyst{
		New: func() *clitest.CLI {
			dir := t.TempDir()
			testfiles.WriteTree(t, dir, map[string]string{"docker-offline.hcl": string(example)})
			c := newCLI(t, dir, "docker-offline.hcl", "AGENTCTL_VAR_image="+TestImage)
			c.destroyOnCleanup(p)
			return c.CLI
		},
		Left: func(lineage string) []string {
			list, err := p.ListManaged(context.Background(), lineage)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range list {
				ids = append(ids, m.ID)
			}
			return ids
		},
	}.ApplyResumeAfterKill(t)
}
