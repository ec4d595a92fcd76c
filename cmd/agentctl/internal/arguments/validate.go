package arguments

import "github.com/hashicorp/hcl/v2"

// Validate are the arguments of agentctl validate.
type Validate struct {
	// Path is the configuration, a file or a directory ("." by default).
	Path     string
	Vars     Vars
	ViewType ViewType
	NoColor  bool
}

// ParseValidate parses validate's arguments: flags and at most one PATH.
func ParseValidate(args []string) (*Validate, hcl.Diagnostics) {
	a := &Validate{Path: ".", ViewType: ViewHuman}
	var jsonOut bool
	fs := newFlagSet("validate")
	fs.BoolVar(&jsonOut, "json", false, "Print the result as JSON (as terraform validate -json).")
	fs.BoolVar(&a.NoColor, "no-color", false, "Disable color in the output.")
	a.Vars.register(fs)
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	a.ViewType = viewType(jsonOut)
	a.Path, diags = onePath(pos)
	return a, diags
}
