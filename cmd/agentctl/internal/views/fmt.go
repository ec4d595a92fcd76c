package views

import (
	"fmt"

	"github.com/agentctl/agentctl/internal/termtext"
)

// Fmt shows what agentctl fmt changed. It has no JSON form.
type Fmt struct{ *View }

// NewFmt returns the fmt view.
func NewFmt(view *View) *Fmt { return &Fmt{view} }

// File reports a file whose formatting changed (or would change).
func (v *Fmt) File(name string) {
	fmt.Fprintln(v.Stdout, termtext.Line(name))
}

// Diff prints a unified diff, control characters of the files shown
// escaped.
func (v *Fmt) Diff(diff []byte) {
	fmt.Fprint(v.Stdout, termtext.Printable(string(diff)))
}

// Formatted writes the formatted standard input, exactly: fmt - is a
// filter.
func (v *Fmt) Formatted(src []byte) {
	_, _ = v.Stdout.Write(src)
}

// Graph shows a rendered graph (DOT or Mermaid). It has no JSON form.
type Graph struct{ *View }

// NewGraph returns the graph view.
func NewGraph(view *View) *Graph { return &Graph{view} }

// Graph prints the rendered graph.
func (v *Graph) Graph(rendered string) {
	fmt.Fprint(v.Stdout, rendered)
}
