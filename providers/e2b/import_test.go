package e2b

import (
	"testing"

	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

// Import adopts an existing sandbox whose labels match the spec, and
// names each difference of one that does not; an unknown id is
// sandbox.ErrNotFound.
func TestImport(t *testing.T) {
	e := newEnv(t)
	other := e.spec
	other.Address = "sandbox.other"
	other.Settings = &Settings{Metadata: map[string]string{"team": "ops"}}
	sandboxtest.CheckImport(t, e.p, e.spec, other, e.create(t), "metadata entry")
}
