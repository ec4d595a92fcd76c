package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/graph"
	"github.com/hashicorp/hcl/v2"
)

// AgentClosure returns the names of name and every agent reachable from
// it through handoffs and agent tools, sorted.
func (c *Config) AgentClosure(name string) []string {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		if a, ok := c.Agents[n]; ok {
			for _, h := range a.Handoffs {
				visit(h)
			}
			for _, t := range a.Tools {
				visit(t.Agent)
			}
		}
	}
	visit(name)
	return slices.Sorted(maps.Keys(seen))
}

// AgentSandbox returns the sandbox instance address agent a uses in run
// ri: the run's override for its start agent, otherwise the agent's own
// ("" for a plain agent).
func (ri *RunInstance) AgentSandbox(a *Agent) string {
	if a.Name == ri.Agent && ri.Sandbox != "" {
		return ri.Sandbox
	}
	return a.Sandbox
}

// RunSandboxes returns the sandbox instance addresses a run uses: its
// own (the run's override or its agent's) and those of every other agent
// it reaches through handoffs and agent tools.
func (c *Config) RunSandboxes(ri *RunInstance) []string {
	return c.sandboxReach().forRun(ri)
}

func (c *Config) sandboxReach() *sandboxReach {
	if c.reach == nil {
		return newSandboxReach(c)
	}
	return c.reach()
}

// sandboxReach computes, per agent, the sandboxes of the agents it
// reaches, once per strongly connected component of the agent graph so
// that large cyclic teams stay cheap. It is complete when built, so runs
// applied in parallel may read it at once.
type sandboxReach struct {
	c     *Config
	comp  map[string]int    // agent -> component
	mem   [][]string        // component -> members
	succ  []map[int]bool    // component -> successor components
	local []map[string]int  // component -> sandbox -> members using it
	below []map[string]bool // component -> sandboxes reached through successors
	all   []map[string]bool // component -> below plus its members' sandboxes
	done  []bool
}

func newSandboxReach(c *Config) *sandboxReach {
	r := &sandboxReach{c: c, comp: map[string]int{}}
	g := c.AgentGraph()
	names := make(map[string]string, len(c.Agents)) // graph node -> agent name
	for name := range c.Agents {
		names[addrs.Agent{Name: name}.String()] = name
	}
	for _, cyc := range g.Cycles() {
		if len(cyc) == 1 && !g.HasEdge(cyc[0], cyc[0]) {
			continue
		}
		id := len(r.mem)
		r.mem = append(r.mem, nil)
		for _, n := range cyc {
			name := names[n]
			r.comp[name] = id
			r.mem[id] = append(r.mem[id], name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		if _, ok := r.comp[name]; !ok {
			r.comp[name] = len(r.mem)
			r.mem = append(r.mem, []string{name})
		}
	}
	n := len(r.mem)
	r.succ = make([]map[int]bool, n)
	r.local = make([]map[string]int, n)
	r.below = make([]map[string]bool, n)
	r.all = make([]map[string]bool, n)
	r.done = make([]bool, n)
	for id, members := range r.mem {
		r.succ[id] = map[int]bool{}
		r.local[id] = map[string]int{}
		for _, m := range members {
			a := c.Agents[m]
			if a.Sandbox != "" {
				r.local[id][a.Sandbox]++
			}
			for _, sn := range a.MCPServers {
				if s := c.MCPServers[sn]; s != nil && s.Sandbox != "" {
					r.local[id][s.Sandbox]++
				}
			}
			for _, t := range r.targets(a) {
				if tc, ok := r.comp[t]; ok && tc != id {
					r.succ[id][tc] = true
				}
			}
		}
	}
	for id := range r.mem {
		r.reach(id)
	}
	return r
}

func (r *sandboxReach) targets(a *Agent) []string {
	out := append([]string{}, a.Handoffs...)
	for _, t := range a.Tools {
		out = append(out, t.Agent)
	}
	return out
}

// reach returns every sandbox used by the agents of the components
// reachable from id, id's own members included.
func (r *sandboxReach) reach(id int) map[string]bool {
	if r.done[id] {
		return r.all[id]
	}
	r.done[id] = true // the condensation is acyclic
	below := map[string]bool{}
	for s := range r.succ[id] {
		for sb := range r.reach(s) {
			below[sb] = true
		}
	}
	r.below[id] = below
	all := make(map[string]bool, len(below)+len(r.local[id]))
	for sb := range below {
		all[sb] = true
	}
	for sb := range r.local[id] {
		all[sb] = true
	}
	r.all[id] = all
	return all
}

func (r *sandboxReach) forRun(ri *RunInstance) []string {
	set := map[string]bool{}
	a, ok := r.c.Agents[ri.Agent]
	if !ok {
		return nil
	}
	if entry := ri.AgentSandbox(a); entry != "" {
		set[entry] = true
	}
	id := r.comp[ri.Agent]
	for sb := range r.below[id] {
		set[sb] = true
	}
	// The other members of the agent's component (its cycle) are
	// reachable; its own sandbox counts only when another agent uses it,
	// since a run's override replaces it for the entry agent.
	for sb, n := range r.local[id] {
		if sb != a.Sandbox || n > 1 {
			set[sb] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// DependencyGraph returns the graph of sandbox and run instances: a run
// depends on the sandboxes it uses, on the runs and sandboxes its input
// refers to, on the run it continues and on its depends_on entries. A cycle is one error
// diagnostic naming every member and its source range.
func (c *Config) DependencyGraph() (*graph.Graph, hcl.Diagnostics) {
	g := graph.New()
	for addr := range c.SandboxInstances {
		g.AddNode(addr)
	}
	reach := c.sandboxReach()
	for addr, ri := range c.RunInstances {
		g.AddNode(addr)
		for _, sb := range reach.forRun(ri) {
			g.AddEdge(addr, sb)
		}
		for _, d := range ri.DependsOn {
			g.AddEdge(addr, d)
		}
	}
	var diags hcl.Diagnostics
	for _, cyc := range g.Cycles() {
		var parts []string
		var first *hcl.Range
		for _, addr := range cyc {
			r := c.declRange(addr)
			if first == nil {
				rr := r
				first = &rr
			}
			parts = append(parts, fmt.Sprintf("  - %s (%s)", addr, rangeString(r)))
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Dependency cycle",
			Detail: fmt.Sprintf("These runs and sandboxes depend on each other in a cycle, so none of them can start first:\n%s\nRemove a reference to an upstream run's output, a depends_on entry or a continue argument to break the cycle.",
				strings.Join(parts, "\n")),
			Subject: first,
		})
	}
	return g, diags
}

func (c *Config) declRange(addr string) hcl.Range {
	if ri, ok := c.RunInstances[addr]; ok {
		return ri.DeclRange
	}
	if si, ok := c.SandboxInstances[addr]; ok {
		return si.DeclRange
	}
	return hcl.Range{}
}

// AgentGraph returns the graph of agents: an edge labeled "handoff" for
// every handoff and "tool NAME" for every agent used as a tool. It may be
// cyclic.
func (c *Config) AgentGraph() *graph.Graph {
	g := graph.New()
	node := func(name string) string { return addrs.Agent{Name: name}.String() }
	for name, a := range c.Agents {
		g.AddNode(node(name))
		for _, h := range a.Handoffs {
			g.AddLabeledEdge(node(name), node(h), "handoff")
		}
		for _, t := range a.Tools {
			g.AddLabeledEdge(node(name), node(t.Agent), "tool "+t.Name)
		}
	}
	return g
}
