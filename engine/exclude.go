package engine

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/state"
)

// checkExcludes fails for an -exclude address that selects no run or
// sandbox of the configuration or the state, naming it and the closest
// address there is.
func checkExcludes(cfg *config.Config, st *state.State, excludes []string) error {
	if len(excludes) == 0 {
		return nil
	}
	known := map[string]bool{}
	for _, m := range []map[string]bool{keysOf(cfg.RunInstances), keysOf(cfg.SandboxInstances), keysOf(st.Runs), keysOf(st.Sandboxes), keysOf(st.Chats)} {
		maps.Copy(known, m)
	}
	candidates := slices.Sorted(maps.Keys(known))
	for _, x := range excludes {
		if !slices.ContainsFunc(candidates, func(a string) bool { return selected(a, []string{x}) }) {
			return fmt.Errorf("-exclude=%s: no run or sandbox in the configuration or the state has this address.%s", x, registry.Suggest(x, candidates))
		}
	}
	return nil
}

// keysOf is the set of a map's keys.
func keysOf[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// filterExcludes leaves out the objects excludes select and what depends
// on them, as OpenTofu's -exclude does; for a destroy, the excluded
// objects and what they depend on (which cannot go while they stay).
func (p *Plan) filterExcludes(cfg *config.Config, excludes []string) {
	if len(excludes) == 0 {
		return
	}
	drop := map[string]bool{}
	g, _ := cfg.DependencyGraph()
	var add func(string)
	add = func(a string) {
		if drop[a] {
			return
		}
		drop[a] = true
		if g == nil {
			return
		}
		next := g.DependentsOf(a)
		if p.Destroy {
			next = g.DependenciesOf(a)
		}
		for _, d := range next {
			add(d)
		}
	}
	for _, c := range p.Changes {
		if selected(c.Address, excludes) {
			add(c.Address)
		}
	}
	out := p.Changes[:0]
	for _, c := range p.Changes {
		if !drop[c.Address] {
			out = append(out, c)
		}
	}
	p.Changes = out
}
