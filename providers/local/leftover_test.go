package local_test

import (
	"context"
	"os"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// A workspace whose creation a killed agentctl never recorded carries the
// lineage and address in its marker; the next Create for that address
// removes it, so nothing is left untracked in the state directory.
func TestCreateRemovesLeftoverOfInterruptedCreate(t *testing.T) {
	stateDir := t.TempDir()
	p := local.New(local.Options{Isolation: local.IsolationNone})
	ctx := context.Background()
	spec := sandbox.Spec{Address: "sandbox.box", Lineage: "lineage-1", StateDir: stateDir, Root: "/workspace"}
	orphan, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	other := spec
	other.Address = "sandbox.box2"
	keep, err := p.Create(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keep.Delete(context.Background()) })
	otherLineage := spec
	otherLineage.Lineage = "lineage-2"
	foreign, err := p.Create(ctx, otherLineage)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { foreign.Delete(context.Background()) })

	fresh, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fresh.Delete(context.Background()) })
	if _, err := os.Stat(orphan.ID()); !os.IsNotExist(err) {
		t.Fatalf("the leftover workspace %s is still there (%v)", orphan.ID(), err)
	}
	for _, sb := range []sandbox.Sandbox{keep, foreign, fresh} {
		if st, err := sb.Refresh(ctx); err != nil || st == sandbox.StatusMissing {
			t.Fatalf("%s: %v %v; only the leftover of the same lineage and address may go", sb.ID(), st, err)
		}
	}
}
