package arguments

import "github.com/hashicorp/hcl/v2"

// Output are the arguments of agentctl output.
type Output struct {
	Backend
	// Name is the output to show; empty shows every output.
	Name string
	// ViewType is ViewHuman, ViewJSON (-json) or ViewRaw (-raw).
	ViewType ViewType
	NoColor  bool
}

// ParseOutput parses output's arguments: flags (-json or -raw, not both)
// and at most one NAME.
func ParseOutput(args []string) (*Output, hcl.Diagnostics) {
	a := &Output{ViewType: ViewHuman}
	var jsonOut, raw bool
	fs := newFlagSet("output")
	a.Backend.register(fs, false)
	registerNoColor(fs, &a.NoColor)
	fs.BoolVar(&jsonOut, "json", false, "Print JSON.")
	fs.BoolVar(&raw, "raw", false, "Print a string output's value with no quoting, for shell scripts.")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	switch {
	case jsonOut && raw:
		diags = append(diags, errorf("-json and -raw cannot be used together: use -json for JSON, or -raw for a string output's exact value"))
	case jsonOut:
		a.ViewType = ViewJSON
	case raw:
		a.ViewType = ViewRaw
	}
	switch len(pos) {
	case 0:
	case 1:
		a.Name = pos[0]
	default:
		diags = append(diags, errorf("Output takes at most one NAME"))
	}
	return a, diags
}
