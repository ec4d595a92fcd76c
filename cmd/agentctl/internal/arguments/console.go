package arguments

import "github.com/hashicorp/hcl/v2"

// Console are the arguments of agentctl console.
type Console struct {
	Backend
	NoColor bool
}

// ParseConsole parses console's arguments: flags only.
func ParseConsole(args []string) (*Console, hcl.Diagnostics) {
	a := &Console{}
	fs := newFlagSet("console")
	a.Backend.register(fs, false)
	registerNoColor(fs, &a.NoColor)
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	if len(pos) > 0 {
		diags = append(diags, errorf("Console takes no arguments: it reads expressions from standard input; use -config to name the configuration"))
	}
	return a, diags
}
