package arguments

import "github.com/hashicorp/hcl/v2"

// Import are the arguments of agentctl import.
type Import struct {
	Backend
	// Address is the sandbox to import as; ID the provider's id of the
	// existing sandbox.
	Address string
	ID      string
	NoColor bool
}

// ParseImport parses import's arguments: flags, then ADDR and ID.
func ParseImport(args []string) (*Import, hcl.Diagnostics) {
	a := &Import{}
	fs := newFlagSet("import")
	a.Backend.register(fs, true)
	registerNoColor(fs, &a.NoColor)
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	if len(pos) != 2 {
		return a, hcl.Diagnostics{errorf("Import needs exactly two arguments: the sandbox address and the existing sandbox's id, as in agentctl import sandbox.box 3f2a9c1d (a container id or name, a local sandbox directory, a Pod name, a hosted sandbox's id)")}
	}
	a.Address, a.ID = pos[0], pos[1]
	return a, nil
}
