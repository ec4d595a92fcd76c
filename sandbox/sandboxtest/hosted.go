package sandboxtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// ListingProvider is a provider that lists and deletes the sandboxes it
// made (sandbox.Lister).
type ListingProvider interface {
	sandbox.Provider
	sandbox.Lister
}

// CheckFindManaged checks a sandbox.Lister against a service: mine was
// created from spec; FindManaged must list it and one more it creates of
// another lineage, each with its lineage and address, and DeleteFound must
// delete mine and no other (ids lists the sandboxes the service still
// holds), and be no error once it is gone.
func CheckFindManaged(t *testing.T, p ListingProvider, spec sandbox.Spec, mine sandbox.Sandbox, ids func() []string) {
	t.Helper()
	ctx := context.Background()
	other := spec
	other.Lineage = "lin-other"
	theirs, err := p.Create(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	found, err := p.FindManaged(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	lineages := map[string]string{}
	for _, f := range found {
		if f.Address != spec.Address {
			t.Errorf("%s listed with address %q, want %q", f.ID, f.Address, spec.Address)
		}
		lineages[f.ID] = f.Lineage
	}
	if len(found) != 2 || lineages[mine.ID()] != spec.Lineage || lineages[theirs.ID()] != "lin-other" {
		t.Fatalf("FindManaged = %+v; want %s (%s) and %s (lin-other)", found, mine.ID(), spec.Lineage, theirs.ID())
	}
	i := slices.IndexFunc(found, func(f sandbox.Found) bool { return f.ID == mine.ID() })
	if err := p.DeleteFound(ctx, "", found[i]); err != nil {
		t.Fatal(err)
	}
	if got := ids(); len(got) != 1 || got[0] != theirs.ID() {
		t.Fatalf("after DeleteFound the provider holds %v; want only %s", got, theirs.ID())
	}
	// Deleting it again is not an error: it is gone.
	if err := p.DeleteFound(ctx, "", found[i]); err != nil {
		t.Fatalf("DeleteFound of a deleted sandbox: %v", err)
	}
}

// CheckImport checks a sandbox.Importer: existing, created from spec, is
// adopted by its id; other (spec with another address and a label team =
// "ops" where existing has "data") is refused with a *MismatchError that
// names both differences, the label's as "its <label> team is ..."; an
// unknown id is sandbox.ErrNotFound.
func CheckImport(t *testing.T, p sandbox.Importer, spec, other sandbox.Spec, existing sandbox.Sandbox, label string) {
	t.Helper()
	ctx := context.Background()
	sb, err := p.Import(ctx, spec, existing.ID())
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID() != existing.ID() || sb.Session().ID != existing.ID() {
		t.Fatalf("imported %s (session %s), want %s", sb.ID(), sb.Session().ID, existing.ID())
	}
	_, err = p.Import(ctx, other, existing.ID())
	var me *sandbox.MismatchError
	if !errors.As(err, &me) || len(me.Differences) != 2 {
		t.Fatalf("import with another address and labels: %v", err)
	}
	for _, want := range []string{"it was created as " + spec.Address, "its " + label + " team is \"data\", the configuration says \"ops\""} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := p.Import(ctx, spec, "no-such-sandbox"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("import of an unknown id: %v, want sandbox.ErrNotFound", err)
	}
}
