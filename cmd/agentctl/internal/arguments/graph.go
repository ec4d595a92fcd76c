package arguments

import "github.com/hashicorp/hcl/v2"

// Graph are the arguments of agentctl graph.
type Graph struct {
	Path string
	// Type is which graph: "plan" (runs and sandboxes) or "agents".
	Type string
	// Format is "dot" or "mermaid".
	Format  string
	Vars    Vars
	NoColor bool
}

// ParseGraph parses graph's arguments: flags, checked against their
// allowed values, and at most one PATH.
func ParseGraph(args []string) (*Graph, hcl.Diagnostics) {
	a := &Graph{Path: "."}
	fs := newFlagSet("graph")
	fs.StringVar(&a.Type, "type", "plan", "Which graph: plan (runs and sandboxes) or agents (handoffs and agent tools).")
	fs.StringVar(&a.Format, "format", "dot", "Output format: dot or mermaid.")
	fs.BoolVar(&a.NoColor, "no-color", false, "Disable color in the output.")
	a.Vars.register(fs)
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	if a.Path, diags = onePath(pos); diags.HasErrors() {
		return a, diags
	}
	if a.Type != "plan" && a.Type != "agents" {
		diags = append(diags, errorf("Invalid -type %q: use -type=plan or -type=agents", a.Type))
	}
	if a.Format != "dot" && a.Format != "mermaid" {
		diags = append(diags, errorf("Invalid -format %q: use -format=dot or -format=mermaid", a.Format))
	}
	return a, diags
}
