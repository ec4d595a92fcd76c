package graph

import (
	"fmt"
	"strings"
)

// DOT renders the graph in Graphviz DOT syntax. Edge labels are shown.
func (g *Graph) DOT(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote(name))
	b.WriteString("  rankdir = \"LR\";\n")
	for _, n := range g.Nodes() {
		fmt.Fprintf(&b, "  %s;\n", dotQuote(n))
	}
	for _, e := range g.Edges() {
		if e.Label != "" {
			fmt.Fprintf(&b, "  %s -> %s [label=%s];\n", dotQuote(e.From), dotQuote(e.To), dotQuote(e.Label))
		} else {
			fmt.Fprintf(&b, "  %s -> %s;\n", dotQuote(e.From), dotQuote(e.To))
		}
	}
	b.WriteString("}\n")
	return b.String()
}

func dotQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	s = strings.ReplaceAll(s, "\n", `\n`)
	return `"` + s + `"`
}

// Mermaid renders the graph as a Mermaid flowchart. Node ids are n0, n1,
// ... in sorted order; the node text is the id. Edge labels are shown.
func (g *Graph) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	ids := map[string]string{}
	for i, n := range g.Nodes() {
		ids[n] = fmt.Sprintf("n%d", i)
		fmt.Fprintf(&b, "  %s[\"%s\"]\n", ids[n], mermaidText(n))
	}
	for _, e := range g.Edges() {
		if e.Label != "" {
			fmt.Fprintf(&b, "  %s -->|\"%s\"| %s\n", ids[e.From], mermaidText(e.Label), ids[e.To])
		} else {
			fmt.Fprintf(&b, "  %s --> %s\n", ids[e.From], ids[e.To])
		}
	}
	return b.String()
}

// mermaidText escapes text for a quoted Mermaid label.
func mermaidText(s string) string {
	return strings.ReplaceAll(s, `"`, "#quot;")
}
