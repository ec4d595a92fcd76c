package config

import (
	"fmt"
	"strings"

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
	return sortedKeys(seen)
}

// RunSandboxes returns the sandbox instance addresses a run uses: its
// own (the run's override or its agent's) and those of every agent it
// reaches through handoffs and agent tools.
func (c *Config) RunSandboxes(ri *RunInstance) []string {
	set := map[string]bool{}
	entry := ri.Sandbox
	if entry == "" {
		if a, ok := c.Agents[ri.Agent]; ok {
			entry = a.Sandbox
		}
	}
	if entry != "" {
		set[entry] = true
	}
	for _, n := range c.AgentClosure(ri.Agent) {
		if n == ri.Agent {
			continue
		}
		if a, ok := c.Agents[n]; ok && a.Sandbox != "" {
			set[a.Sandbox] = true
		}
	}
	return sortedKeys(set)
}

// DependencyGraph returns the graph of sandbox and run instances: a run
// depends on the sandboxes it uses, on the runs and sandboxes its input
// refers to, and on its depends_on entries. A cycle is one error
// diagnostic naming every member and its source range.
func (c *Config) DependencyGraph() (*graph.Graph, hcl.Diagnostics) {
	g := graph.New()
	for addr := range c.SandboxInstances {
		g.AddNode(addr)
	}
	for addr, ri := range c.RunInstances {
		g.AddNode(addr)
		for _, sb := range c.RunSandboxes(ri) {
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
			Detail: fmt.Sprintf("These runs and sandboxes depend on each other in a cycle, so none of them can start first:\n%s\nRemove a reference to an upstream run's output or a depends_on entry to break the cycle.",
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
	for name, a := range c.Agents {
		g.AddNode("agent." + name)
		for _, h := range a.Handoffs {
			g.AddLabeledEdge("agent."+name, "agent."+h, "handoff")
		}
		for _, t := range a.Tools {
			g.AddLabeledEdge("agent."+name, "agent."+t.Agent, "tool "+t.Name)
		}
	}
	return g
}
