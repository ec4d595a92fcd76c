package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// What agentctl query makes of a sandbox a provider holds.
const (
	// FoundManaged: a state of this configuration records it.
	FoundManaged = "managed"
	// FoundOrphan: created for a lineage of this configuration, but no
	// state records it (an apply killed during its creation, a state
	// entry removed by hand): query -reap deletes it.
	FoundOrphan = "orphan"
	// FoundForeign: another configuration's (another lineage): listed,
	// never reaped.
	FoundForeign = "foreign"
)

// Found is a sandbox a configured provider holds that agentctl created,
// and what this configuration makes of it.
type Found struct {
	// Provider is the configuration address of the provider that holds it.
	Provider string `json:"provider"`
	Kind     string `json:"kind"`
	sandbox.Found
	// Status is FoundManaged, FoundOrphan or FoundForeign.
	Status string `json:"status"`
}

// Unlisted is a configured sandbox provider query could not list.
type Unlisted struct {
	Provider string `json:"provider"`
	Reason   string `json:"reason"`
}

// QueryResult is what agentctl query found.
type QueryResult struct {
	// Lineages are those of the states the sandboxes were compared with.
	Lineages  []string   `json:"lineages"`
	Sandboxes []Found    `json:"sandboxes"`
	Unlisted  []Unlisted `json:"unlisted,omitempty"`
}

// Orphans are the result's sandboxes with status FoundOrphan.
func (r *QueryResult) Orphans() []Found {
	var out []Found
	for _, f := range r.Sandboxes {
		if f.Status == FoundOrphan {
			out = append(out, f)
		}
	}
	return out
}

// QueryOptions say which providers Query asks.
type QueryOptions struct {
	// CheapOnly asks only the providers whose listing is a call on this
	// machine (sandbox.Lister's ListsCheaply), and only those already
	// built, and lists none it skips as Unlisted: apply's warning.
	CheapOnly bool
}

// Query lists, per configured sandbox provider, the sandboxes it holds
// that agentctl created, and says which of them the states (every state
// of this configuration) record, which are orphans of their lineages and
// which belong to other configurations. A provider that cannot list is
// named in Unlisted with why; one whose listing fails fails the query.
func (e *Engine) Query(ctx context.Context, states []*state.State, opts QueryOptions) (*QueryResult, error) {
	res := &QueryResult{Lineages: []string{}, Sandboxes: []Found{}}
	lineages := map[string]bool{}
	known := map[string]bool{} // kind + "\x00" + id
	for _, st := range states {
		if st.Lineage != "" && !lineages[st.Lineage] {
			lineages[st.Lineage] = true
			res.Lineages = append(res.Lineages, st.Lineage)
		}
		for _, sb := range st.Sandboxes {
			known[sb.Kind+"\x00"+sb.Session.ID] = true
		}
	}
	seen := map[string]bool{}
	for _, addr := range e.sandboxProviders() {
		if opts.CheapOnly && !e.provs().built(addr) {
			continue
		}
		prov, err := e.provs().sandboxProvider(ctx, e, addr)
		if err != nil {
			return nil, err
		}
		l, ok := prov.(sandbox.Lister)
		if !ok {
			if !opts.CheapOnly {
				res.Unlisted = append(res.Unlisted, Unlisted{Provider: addr, Reason: fmt.Sprintf("provider type %s cannot list the sandboxes it holds", prov.Kind())})
			}
			continue
		}
		if opts.CheapOnly && !l.ListsCheaply() {
			continue
		}
		found, err := l.FindManaged(ctx, e.State.Abs("sandboxes"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		for _, f := range found {
			key := prov.Kind() + "\x00" + f.ID
			if seen[key] {
				continue // two provider blocks reaching the same place
			}
			seen[key] = true
			status := FoundForeign
			switch {
			case known[key]:
				status = FoundManaged
			case f.Lineage != "" && lineages[f.Lineage]:
				status = FoundOrphan
			}
			res.Sandboxes = append(res.Sandboxes, Found{Provider: addr, Kind: prov.Kind(), Found: f, Status: status})
		}
	}
	return res, nil
}

// sandboxProviders are the addresses of the configured sandbox
// providers: those declared, and those the sandboxes name.
func (e *Engine) sandboxProviders() []string {
	addrs := map[string]bool{}
	for _, p := range e.Config.Providers {
		if p.Role == registry.RoleSandbox {
			addrs[p.Addr] = true
		}
	}
	for _, sb := range e.Config.SandboxInstances {
		addrs[sb.Provider] = true
	}
	return slices.Sorted(maps.Keys(addrs))
}

// Reap deletes the orphans among found (others are refused), reporting
// each one deleted to done; it goes on past a failure and returns every
// error.
func (e *Engine) Reap(ctx context.Context, found []Found, done func(Found)) error {
	var errs []error
	for _, f := range found {
		if f.Status != FoundOrphan {
			errs = append(errs, fmt.Errorf("%s %s is %s, not an orphan: it is not deleted", f.Kind, f.ID, f.Status))
			continue
		}
		prov, err := e.provs().sandboxProvider(ctx, e, f.Provider)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l, ok := prov.(sandbox.Lister)
		if !ok {
			errs = append(errs, fmt.Errorf("%s cannot delete %s: it cannot list its sandboxes", f.Provider, f.ID))
			continue
		}
		if err := l.DeleteFound(ctx, e.State.Abs("sandboxes"), f.Found); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Provider, err))
			continue
		}
		if done != nil {
			done(f)
		}
	}
	return errors.Join(errs...)
}
