package kubernetes

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

// The manifest's users are accounts of the container (sandboxtest checks
// their ids, files and refusals): named, and created again without
// error, as a second sandbox of the same image does.
func TestManifestUsers(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Image = k8stest.UsersImage
	spec.Accounts = sandboxtest.Accounts()
	sb := c.newSandbox(t, spec)
	sandboxtest.CheckNamed(t, sb, "/workspace")
	if err := sb.createAccounts(context.Background()); err != nil {
		t.Errorf("creating the accounts again: %v", err)
	}
}

// An image without account tools is refused with its name, and nothing
// is left behind.
func TestManifestUsersWithoutTools(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Accounts = sandboxtest.Accounts()
	sb, err := c.p.Create(context.Background(), spec)
	if err == nil {
		sb.Delete(context.Background())
		t.Fatal("Create succeeded in an image without adduser or useradd")
	}
	mustContain(t, "no tools", err.Error(), k8stest.Image, "useradd or adduser", "no tools to create them")
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
