package arguments

import "github.com/hashicorp/hcl/v2"

// Version are the arguments of agentctl version.
type Version struct {
	ViewType ViewType
}

// ParseVersion parses version's arguments: -json only.
func ParseVersion(args []string) (*Version, hcl.Diagnostics) {
	a := &Version{ViewType: ViewHuman}
	var jsonOut bool
	fs := newFlagSet("version")
	fs.BoolVar(&jsonOut, "json", false, "Print the version as JSON.")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	a.ViewType = viewType(jsonOut)
	if len(pos) > 0 {
		diags = append(diags, errorf("Version takes no arguments"))
	}
	return a, diags
}
