package e2b

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// Import adopts an existing sandbox whose labels match the spec, and
// names each difference of one that does not; an unknown id is
// sandbox.ErrNotFound.
func TestImport(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w := e.create(t)
	sb, err := e.p.Import(ctx, e.spec, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID() != w.ID() || sb.Session().ID != w.ID() {
		t.Fatalf("imported %s (session %s), want %s", sb.ID(), sb.Session().ID, w.ID())
	}
	other := e.spec
	other.Address = "sandbox.other"
	other.Settings = &Settings{Metadata: map[string]string{"team": "ops"}}
	_, err = e.p.Import(ctx, other, w.ID())
	var me *sandbox.MismatchError
	if !errors.As(err, &me) || len(me.Differences) != 2 {
		t.Fatalf("import with another address and labels: %v", err)
	}
	for _, want := range []string{"it was created as " + e.spec.Address, "its metadata entry team is \"data\", the configuration says \"ops\""} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := e.p.Import(ctx, e.spec, "no-such-sandbox"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("import of an unknown id: %v, want sandbox.ErrNotFound", err)
	}
}
