package arguments

import "github.com/hashicorp/hcl/v2"

// Show are the arguments of agentctl show.
type Show struct {
	Backend
	// Target is a state address (run.NAME, sandbox.NAME) or a saved plan
	// file; empty shows the whole state.
	Target   string
	ViewType ViewType
	NoColor  bool
}

// ParseShow parses show's arguments: flags and at most one ADDR or
// PLANFILE.
func ParseShow(args []string) (*Show, hcl.Diagnostics) {
	a := &Show{ViewType: ViewHuman}
	var jsonOut bool
	fs := newFlagSet("show")
	a.Backend.register(fs, false)
	registerNoColor(fs, &a.NoColor)
	fs.BoolVar(&jsonOut, "json", false, "Print JSON.")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	a.ViewType = viewType(jsonOut)
	switch len(pos) {
	case 0:
	case 1:
		a.Target = pos[0]
	default:
		diags = append(diags, errorf("Show takes at most one argument: an address such as run.NAME, or a saved plan file"))
	}
	return a, diags
}
