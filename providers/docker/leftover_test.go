package docker

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/google/uuid"
)

// A container whose creation a killed agentctl never recorded carries the
// lineage and address; the next Create for that address removes it, so
// nothing is left untracked.
func TestCreateRemovesLeftoverOfInterruptedCreate(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	spec := sandbox.Spec{Address: "sandbox.leftover", Lineage: "test-" + uuid.NewString(), Image: TestImage, Root: "/workspace"}
	orphan, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orphan.Delete(context.Background()) })
	other := spec
	other.Address = "sandbox.other"
	keep, err := p.Create(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keep.Delete(context.Background()) })

	fresh, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fresh.Delete(context.Background()) })
	found, err := p.ListManaged(ctx, spec.Lineage)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range found {
		ids[m.ID] = true
	}
	if ids[orphan.ID()] || !ids[fresh.ID()] || !ids[keep.ID()] || len(found) != 2 {
		t.Fatalf("managed containers %+v: want the fresh one and the other address's, not the leftover %s", found, orphan.ID())
	}
}
