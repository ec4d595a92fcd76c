package arguments

import "github.com/hashicorp/hcl/v2"

// Query are the arguments of agentctl query.
type Query struct {
	Backend
	// Reap deletes the orphans found, after confirmation unless
	// AutoApprove.
	Reap        bool
	AutoApprove bool
	ViewType    ViewType
	NoColor     bool
}

// ParseQuery parses query's arguments: flags only.
func ParseQuery(args []string) (*Query, hcl.Diagnostics) {
	a := &Query{ViewType: ViewHuman}
	var jsonOut bool
	fs := newFlagSet("query")
	a.Backend.register(fs, true)
	registerNoColor(fs, &a.NoColor)
	fs.BoolVar(&jsonOut, "json", false, "Print JSON.")
	fs.BoolVar(&a.Reap, "reap", false, "Delete the orphans found (after confirmation).")
	fs.BoolVar(&a.AutoApprove, "auto-approve", false, "Delete the orphans without asking (with -reap).")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	a.ViewType = viewType(jsonOut)
	if len(pos) > 0 {
		diags = append(diags, errorf("Query takes no arguments; use -config to name the configuration"))
	}
	if a.AutoApprove && !a.Reap {
		diags = append(diags, errorf("-auto-approve is for -reap: query alone deletes nothing"))
	}
	return a, diags
}
