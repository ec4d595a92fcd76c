package sandbox

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLabels(t *testing.T) {
	spec := Spec{Address: `sandbox.review["pricing"]`, Lineage: "lin-1"}
	got := Labels(spec, map[string]string{"team": "data", LabelManaged: "false"})
	want := map[string]string{"team": "data", LabelManaged: "true", LabelLineage: "lin-1", LabelAddress: `sandbox.review["pricing"]`}
	if !maps.Equal(got, want) {
		t.Errorf("Labels = %v, want %v", got, want)
	}
	if got := Labels(Spec{}, nil); !maps.Equal(got, map[string]string{LabelManaged: "true"}) {
		t.Errorf("Labels of a spec without lineage and address = %v", got)
	}
}

func TestCommand(t *testing.T) {
	for _, tt := range []struct {
		req     ExecRequest
		want    []string
		wantErr string
	}{
		{ExecRequest{Argv: []string{"ls", "-l"}}, []string{"ls", "-l"}, ""},
		{ExecRequest{Argv: []string{"ls"}, Shell: "ignored"}, []string{"ls"}, ""},
		{ExecRequest{Shell: "echo hi | wc -c"}, []string{"/bin/sh", "-c", "echo hi | wc -c"}, ""},
		{ExecRequest{}, nil, "neither a command (argv) nor a shell string"},
		{ExecRequest{Argv: []string{"", "x"}}, nil, "program name is empty"},
		{ExecRequest{Argv: []string{"echo", "a\x00b"}}, nil, "argument 1 contains a NUL byte"},
		{ExecRequest{Shell: "echo \x00"}, nil, "argument 2 contains a NUL byte"},
	} {
		got, err := tt.req.Command()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Command(%+v) = %q, %v; want an error saying %q", tt.req, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Command(%+v) = %q, %v; want %q", tt.req, got, err, tt.want)
		}
	}
}

type ctxKey struct{}

func TestCleanupContext(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "v"))
	cancel()
	ctx, done := CleanupContext(parent)
	defer done()
	if ctx.Err() != nil {
		t.Fatalf("the cleanup context inherited the interrupt: %v", ctx.Err())
	}
	if ctx.Value(ctxKey{}) != "v" {
		t.Error("the cleanup context lost the parent's values")
	}
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > CleanupTimeout || time.Until(deadline) < CleanupTimeout-time.Minute {
		t.Errorf("deadline = %v (ok %v), want about %v from now", deadline, ok, CleanupTimeout)
	}
	done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after cancel: %v", ctx.Err())
	}
}

func TestRemoveLeftovers(t *testing.T) {
	type cand struct{ id, lineage, address string }
	found := []cand{
		{"a", "lin-1", "sandbox.a"},
		{"b", "lin-1", "sandbox.b"},
		{"c", "lin-2", "sandbox.a"},
		{"d", "", ""},
		{"e", "lin-1", "sandbox.a"},
	}
	owner := func(c cand) (string, string) { return c.lineage, c.address }
	run := func(spec Spec, listErr, removeErr error) ([]string, bool, error) {
		var removed []string
		listed := false
		err := RemoveLeftovers(t.Context(), spec,
			func(context.Context) ([]cand, error) { listed = true; return found, listErr },
			owner,
			func(_ context.Context, c cand) error { removed = append(removed, c.id); return removeErr })
		return removed, listed, err
	}
	removed, _, err := run(Spec{Lineage: "lin-1", Address: "sandbox.a"}, nil, nil)
	if err != nil || !slices.Equal(removed, []string{"a", "e"}) {
		t.Errorf("removed %q, %v; want a and e", removed, err)
	}
	for _, spec := range []Spec{{Address: "sandbox.a"}, {Lineage: "lin-1"}} {
		if removed, listed, err := run(spec, nil, nil); listed || removed != nil || err != nil {
			t.Errorf("spec %+v: listed %v, removed %q, %v; want nothing done", spec, listed, removed, err)
		}
	}
	listErr := errors.New("list failed")
	if _, _, err := run(Spec{Lineage: "lin-1", Address: "sandbox.a"}, listErr, nil); err != listErr {
		t.Errorf("list error: %v", err)
	}
	removeErr := errors.New("remove failed")
	if removed, _, err := run(Spec{Lineage: "lin-1", Address: "sandbox.a"}, nil, removeErr); err != removeErr || !slices.Equal(removed, []string{"a"}) {
		t.Errorf("remove error: removed %q, %v; want a stop after a", removed, err)
	}
}
