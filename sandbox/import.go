package sandbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Importer is implemented by a Provider that can adopt an existing
// sandbox it did not create for this state: import blocks and agentctl
// import.
type Importer interface {
	// Import finds the sandbox id names (the provider's id, or a name it
	// also knows it by) and checks it against spec: that it is what
	// creating spec would have made, as far as the provider can tell
	// (image, network, ports, user, resources, labels). It changes
	// nothing, so plan calls it too. It returns an error wrapping
	// ErrNotFound when there is no such sandbox, and a *MismatchError
	// naming every difference when it does not match.
	Import(ctx context.Context, spec Spec, id string) (Sandbox, error)
}

// MismatchError says how an existing sandbox differs from what its
// configuration would create, so that it cannot be imported as it is.
type MismatchError struct {
	// ID names the sandbox.
	ID string
	// Differences are each a sentence: what the sandbox has, what the
	// configuration says, and how to reconcile them.
	Differences []string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s does not match the configuration: %s", e.ID, strings.Join(e.Differences, "; "))
}

// LabelDifferences are the differences between the agentctl labels an
// existing sandbox carries and spec: a sandbox created for another state
// (another lineage) or as another address cannot be imported; one
// without agentctl's labels (made by hand) can.
func LabelDifferences(spec Spec, labels map[string]string) []string {
	var out []string
	if l := labels[LabelLineage]; l != "" && spec.Lineage != "" && l != spec.Lineage {
		out = append(out, fmt.Sprintf("it was created by agentctl for another state (label %s=%s, this state's lineage is %s): import it into that configuration, or remove it there first", LabelLineage, l, spec.Lineage))
	}
	if a := labels[LabelAddress]; a != "" && spec.Address != "" && a != spec.Address {
		out = append(out, fmt.Sprintf("it was created as %s (label %s), not %s: import it as %s", a, LabelAddress, spec.Address, a))
	}
	return out
}

// ValueDifferences names each entry of want (labels, metadata the
// configuration sets) that have lacks or holds with another value; what
// names the kind of entry ("label").
func ValueDifferences(what string, have, want map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := have[k]; !ok {
			out = append(out, fmt.Sprintf("it has no %s %s, which the configuration sets to %q", what, k, want[k]))
		} else if v != want[k] {
			out = append(out, fmt.Sprintf("its %s %s is %q, the configuration says %q", what, k, v, want[k]))
		}
	}
	return out
}
