package daytona

import (
	"context"
	"slices"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// FindManaged lists the sandboxes of every lineage with their lineage
// and address; DeleteFound deletes the one it is given and no other.
func TestFindManagedAndDeleteFound(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mine := e.create(t)
	other := e.spec
	other.Lineage = "lin-other"
	theirs, err := e.p.Create(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	found, err := e.p.FindManaged(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	lineages := map[string]string{}
	for _, f := range found {
		if f.Address != e.spec.Address {
			t.Errorf("%s listed with address %q, want %q", f.ID, f.Address, e.spec.Address)
		}
		lineages[f.ID] = f.Lineage
	}
	if len(found) != 2 || lineages[mine.ID()] != e.spec.Lineage || lineages[theirs.ID()] != "lin-other" {
		t.Fatalf("FindManaged = %+v; want %s (%s) and %s (lin-other)", found, mine.ID(), e.spec.Lineage, theirs.ID())
	}
	i := slices.IndexFunc(found, func(f sandbox.Found) bool { return f.ID == mine.ID() })
	if err := e.p.DeleteFound(ctx, "", found[i]); err != nil {
		t.Fatal(err)
	}
	if ids := e.fake.IDs(); len(ids) != 1 || ids[0] != theirs.ID() {
		t.Fatalf("after DeleteFound the provider holds %v; want only %s", ids, theirs.ID())
	}
	// Deleting it again is not an error: it is gone.
	if err := e.p.DeleteFound(ctx, "", found[i]); err != nil {
		t.Fatalf("DeleteFound of a deleted sandbox: %v", err)
	}
}
