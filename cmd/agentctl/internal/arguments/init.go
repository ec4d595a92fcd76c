package arguments

import "github.com/hashicorp/hcl/v2"

// Init are the arguments of agentctl init.
type Init struct {
	// Path is the configuration, a file or a directory ("." by default).
	Path string
	Vars Vars
	// State holds -lock and -lock-timeout, for the locks migration takes.
	State State
	// MigrateState moves the local state, journals and snapshots into
	// the configured backend.
	MigrateState bool
	// Reconfigure uses the configured backend as it is, leaving the
	// local state where it is.
	Reconfigure bool
	NoColor     bool
}

// ParseInit parses init's arguments: flags and at most one PATH.
func ParseInit(args []string) (*Init, hcl.Diagnostics) {
	a := &Init{Path: "."}
	fs := newFlagSet("init")
	fs.BoolVar(&a.MigrateState, "migrate-state", false, "Move the local state, its journals and snapshots into the configured backend.")
	fs.BoolVar(&a.Reconfigure, "reconfigure", false, "Use the configured backend as it is, without moving the local state into it.")
	registerNoColor(fs, &a.NoColor)
	a.Vars.register(fs)
	a.State.register(fs)
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	if a.MigrateState && a.Reconfigure {
		return a, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Conflicting options", Detail: "-migrate-state and -reconfigure cannot be used together: -migrate-state moves the local state into the backend, -reconfigure leaves it behind."}}
	}
	a.Path, diags = onePath(pos)
	return a, diags
}
