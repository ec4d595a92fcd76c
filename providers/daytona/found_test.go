package daytona

import (
	"testing"

	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

// FindManaged lists the sandboxes of every lineage with their lineage
// and address; DeleteFound deletes the one it is given and no other.
func TestFindManagedAndDeleteFound(t *testing.T) {
	e := newEnv(t)
	sandboxtest.CheckFindManaged(t, e.p, e.spec, e.create(t), e.fake.IDs)
}
