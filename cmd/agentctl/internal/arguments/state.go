package arguments

import "github.com/hashicorp/hcl/v2"

// StateList are the arguments of agentctl state list.
type StateList struct {
	Backend
	ViewType ViewType
	NoColor  bool
}

// ParseStateList parses state list's arguments: flags only.
func ParseStateList(args []string) (*StateList, hcl.Diagnostics) {
	a := &StateList{ViewType: ViewHuman}
	var jsonOut bool
	fs := newFlagSet("state list")
	a.Backend.register(fs, false)
	registerNoColor(fs, &a.NoColor)
	fs.BoolVar(&jsonOut, "json", false, "Print JSON.")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	a.ViewType = viewType(jsonOut)
	if len(pos) > 0 {
		diags = append(diags, errorf("State list takes no arguments; agentctl state show ADDR shows one object"))
	}
	return a, diags
}

// StateShow are the arguments of agentctl state show, which always
// prints JSON.
type StateShow struct {
	Backend
	Address string
	NoColor bool
}

// ParseStateShow parses state show's arguments: flags and exactly one
// ADDR.
func ParseStateShow(args []string) (*StateShow, hcl.Diagnostics) {
	a := &StateShow{}
	var jsonOut bool
	fs := newFlagSet("state show")
	a.Backend.register(fs, false)
	registerNoColor(fs, &a.NoColor)
	fs.BoolVar(&jsonOut, "json", false, "Print JSON (state show always does; accepted as for state list).")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	if len(pos) != 1 {
		return a, hcl.Diagnostics{errorf("State show needs exactly one address, such as run.NAME or sandbox.NAME")}
	}
	a.Address = pos[0]
	return a, nil
}

// StateRm are the arguments of agentctl state rm.
type StateRm struct {
	Backend
	Addresses []string
	NoColor   bool
}

// ParseStateRm parses state rm's arguments: flags and at least one ADDR.
func ParseStateRm(args []string) (*StateRm, hcl.Diagnostics) {
	a := &StateRm{}
	fs := newFlagSet("state rm")
	a.Backend.register(fs, true)
	registerNoColor(fs, &a.NoColor)
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	if len(pos) == 0 {
		return a, hcl.Diagnostics{errorf("State rm needs at least one address")}
	}
	a.Addresses = pos
	return a, nil
}

// ForceUnlock are the arguments of agentctl force-unlock.
type ForceUnlock struct {
	Backend
	LockID  string
	NoColor bool
}

// ParseForceUnlock parses force-unlock's arguments: flags and exactly
// one LOCK_ID.
func ParseForceUnlock(args []string) (*ForceUnlock, hcl.Diagnostics) {
	a := &ForceUnlock{}
	fs := newFlagSet("force-unlock")
	a.Backend.register(fs, false)
	registerNoColor(fs, &a.NoColor)
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	if len(pos) != 1 {
		return a, hcl.Diagnostics{errorf("Force-unlock needs the lock ID printed in the lock error")}
	}
	a.LockID = pos[0]
	return a, nil
}
