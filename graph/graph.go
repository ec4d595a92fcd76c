// Package graph is a small directed graph over string node ids used for
// the dependency graph of runs and sandboxes and for the agent graph.
//
// Convention: an edge from A to B means "A depends on B". Walk and
// TopoOrder visit dependencies before their dependents.
package graph

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Graph is a directed graph. The zero value is not usable; call New.
// A Graph is not safe for concurrent mutation.
type Graph struct {
	nodes map[string]struct{}
	// out[a][b] is the set of labels on edges a -> b ("" for unlabeled).
	out map[string]map[string]map[string]struct{}
	in  map[string]map[string]struct{}
}

// New returns an empty graph.
func New() *Graph {
	return &Graph{
		nodes: map[string]struct{}{},
		out:   map[string]map[string]map[string]struct{}{},
		in:    map[string]map[string]struct{}{},
	}
}

// AddNode adds a node; adding an existing node is a no-op.
func (g *Graph) AddNode(id string) {
	g.nodes[id] = struct{}{}
}

// HasNode reports whether id is a node of g.
func (g *Graph) HasNode(id string) bool {
	_, ok := g.nodes[id]
	return ok
}

// AddEdge adds an unlabeled edge from -> to ("from depends on to"),
// adding missing nodes.
func (g *Graph) AddEdge(from, to string) {
	g.AddLabeledEdge(from, to, "")
}

// AddLabeledEdge adds an edge with a label (shown by DOT and Mermaid).
// Several labels may exist between the same pair of nodes.
func (g *Graph) AddLabeledEdge(from, to, label string) {
	g.AddNode(from)
	g.AddNode(to)
	m := g.out[from]
	if m == nil {
		m = map[string]map[string]struct{}{}
		g.out[from] = m
	}
	ls := m[to]
	if ls == nil {
		ls = map[string]struct{}{}
		m[to] = ls
	}
	ls[label] = struct{}{}
	in := g.in[to]
	if in == nil {
		in = map[string]struct{}{}
		g.in[to] = in
	}
	in[from] = struct{}{}
}

// HasEdge reports whether there is an edge from -> to.
func (g *Graph) HasEdge(from, to string) bool {
	_, ok := g.out[from][to]
	return ok
}

// Nodes returns every node, sorted.
func (g *Graph) Nodes() []string {
	return slices.Sorted(maps.Keys(g.nodes))
}

// DependenciesOf returns the direct dependencies of id, sorted.
func (g *Graph) DependenciesOf(id string) []string {
	return slices.Sorted(maps.Keys(g.out[id]))
}

// DependentsOf returns the nodes that depend directly on id, sorted.
func (g *Graph) DependentsOf(id string) []string {
	return slices.Sorted(maps.Keys(g.in[id]))
}

// Edge is one labeled edge.
type Edge struct {
	From, To, Label string
}

// Edges returns every edge, sorted by from, to, label.
func (g *Graph) Edges() []Edge {
	var es []Edge
	for _, from := range g.Nodes() {
		for _, to := range slices.Sorted(maps.Keys(g.out[from])) {
			for _, l := range slices.Sorted(maps.Keys(g.out[from][to])) {
				es = append(es, Edge{From: from, To: to, Label: l})
			}
		}
	}
	return es
}

// Cycles returns the strongly connected components with more than one
// node, plus every node with an edge to itself, found with Tarjan's
// algorithm. Each cycle's members are sorted, and cycles are sorted by
// their first member, so the result is deterministic.
func (g *Graph) Cycles() [][]string {
	index := 0
	indices := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string

	var strong func(v string)
	strong = func(v string) {
		indices[v] = index
		low[v] = index
		index++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g.DependenciesOf(v) {
			if _, seen := indices[w]; !seen {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], indices[w])
			}
		}
		if low[v] == indices[v] {
			var scc []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			if len(scc) > 1 || g.HasEdge(v, v) {
				sort.Strings(scc)
				out = append(out, scc)
			}
		}
	}
	for _, v := range g.Nodes() {
		if _, seen := indices[v]; !seen {
			strong(v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// ErrCycle is wrapped by TopoOrder when the graph has a cycle.
var ErrCycle = errors.New("dependency cycle")

// TopoOrder returns the nodes with every dependency before its
// dependents; ties are broken by name. It fails with an error wrapping
// ErrCycle when the graph is cyclic.
func (g *Graph) TopoOrder() ([]string, error) {
	if cs := g.Cycles(); len(cs) > 0 {
		parts := make([]string, len(cs))
		for i, c := range cs {
			parts[i] = strings.Join(c, ", ")
		}
		return nil, fmt.Errorf("%w between %s", ErrCycle, strings.Join(parts, "; "))
	}
	pending := map[string]int{}
	var ready []string
	for _, n := range g.Nodes() {
		pending[n] = len(g.out[n])
		if pending[n] == 0 {
			ready = append(ready, n)
		}
	}
	var order []string
	for len(ready) > 0 {
		sort.Strings(ready)
		n := ready[0]
		ready = ready[1:]
		order = append(order, n)
		for _, d := range g.DependentsOf(n) {
			pending[d]--
			if pending[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	return order, nil
}

// TransitiveReduction returns a copy of g without the edges implied by
// longer paths (a -> c is dropped when a -> b -> ... -> c exists). Labels
// of kept edges are kept. On a cyclic graph the result is a copy of g.
func (g *Graph) TransitiveReduction() *Graph {
	r := g.copy()
	if len(g.Cycles()) > 0 {
		return r
	}
	for _, a := range g.Nodes() {
		for _, b := range g.DependenciesOf(a) {
			// Drop a -> c for every c reachable from b.
			for c := range g.reachable(b) {
				if c != b && r.HasEdge(a, c) {
					r.removeEdge(a, c)
				}
			}
		}
	}
	return r
}

// reachable returns every node reachable from start, start included.
func (g *Graph) reachable(start string) map[string]struct{} {
	seen := map[string]struct{}{start: {}}
	stack := []string{start}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for d := range g.out[n] {
			if _, ok := seen[d]; !ok {
				seen[d] = struct{}{}
				stack = append(stack, d)
			}
		}
	}
	return seen
}

func (g *Graph) removeEdge(from, to string) {
	delete(g.out[from], to)
	delete(g.in[to], from)
}

func (g *Graph) copy() *Graph {
	c := New()
	for n := range g.nodes {
		c.AddNode(n)
	}
	for from, m := range g.out {
		for to, ls := range m {
			for l := range ls {
				c.AddLabeledEdge(from, to, l)
			}
		}
	}
	return c
}
