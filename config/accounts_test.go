package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/sandbox"
)

// Ids left out are assigned from sandbox.FirstAutoID up, users first, in
// declaration order, skipping every id taken as a uid or a gid.
func TestManifestAccountIDs(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": `
manifest "m" {
  group "dev" { users = ["bob", "alice"] }
  user "alice" {}
  user "bob" { uid = 2001 }
  user "carol" {}
  group "ops" { gid = 2000 }
}
`}, Options{})
	want := sandbox.Accounts{
		Users:  []sandbox.User{{Name: "alice", UID: 2002}, {Name: "bob", UID: 2001}, {Name: "carol", UID: 2003}},
		Groups: []sandbox.Group{{Name: "dev", GID: 2004, Users: []string{"bob", "alice"}}, {Name: "ops", GID: 2000}},
	}
	if diff := cmp.Diff(want, c.Manifests["m"].Accounts); diff != "" {
		t.Errorf("accounts (-want +got):\n%s", diff)
	}
	if got := c.Manifests["m"].Accounts.GroupsOf("alice"); len(got) != 1 || got[0].Name != "dev" {
		t.Errorf("groups of alice = %v", got)
	}
}
