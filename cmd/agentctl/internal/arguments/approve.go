package arguments

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Approve are the arguments of agentctl approve and agentctl reject.
type Approve struct {
	Backend
	// Reject is set for agentctl reject.
	Reject bool
	// Run is the run's address, run.NAME.
	Run string
	// CallIDs are the tool calls decided; empty with All for every
	// pending call (approve only).
	CallIDs []string
	All     bool
	// Tools get a standing decision (-tool, repeatable): every later call
	// of each in the run is approved (rejected) without asking; with
	// Revoke, their standing decision is withdrawn instead.
	Tools  []string
	Revoke bool
	Reason string
	// ViewType is ViewHuman or ViewJSON (-json).
	ViewType ViewType
	NoColor  bool
}

// ParseApprove parses approve's arguments: flags, run.NAME, then the call
// ids, or -all for every pending call.
func ParseApprove(args []string) (*Approve, hcl.Diagnostics) {
	return parseDecision("approve", args)
}

// ParseReject parses reject's arguments: flags, run.NAME and at least one
// call id.
func ParseReject(args []string) (*Approve, hcl.Diagnostics) {
	return parseDecision("reject", args)
}

func parseDecision(name string, args []string) (*Approve, hcl.Diagnostics) {
	a := &Approve{Reject: name == "reject", ViewType: ViewHuman}
	var jsonOut bool
	fs := newFlagSet(name)
	a.Backend.register(fs, true)
	registerNoColor(fs, &a.NoColor)
	fs.BoolVar(&jsonOut, "json", false, "Print the decisions as JSON events (approval_decided).")
	fs.StringVar(&a.Reason, "reason", "", "Why: recorded with the decision; a rejected call's output gives it to the model.")
	if name == "approve" {
		fs.BoolVar(&a.All, "all", false, "Approve every pending call of the run.")
	}
	word := "always"
	if a.Reject {
		word = "never"
	}
	verb := strings.ToUpper(name[:1]) + name[1:]
	fs.Var((*stringList)(&a.Tools), "tool", verb+" every pending and later call of this tool in the run without asking (the prompt's "+word+"). Repeatable.")
	fs.BoolVar(&a.Revoke, "revoke", false, "With -tool: withdraw the tool's standing decision; its later calls are asked about again.")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	if jsonOut {
		a.ViewType = ViewJSON
	}
	if len(pos) == 0 || !strings.HasPrefix(pos[0], "run.") {
		return a, hcl.Diagnostics{errorf("%s needs a run address first, like agentctl %s run.NAME CALL_ID", verb, name)}
	}
	a.Run, a.CallIDs = pos[0], pos[1:]
	switch {
	case a.Revoke && len(a.Tools) == 0:
		diags = append(diags, errorf("-revoke withdraws the standing decision of a tool: name it with -tool NAME"))
	case a.Revoke && (a.All || len(a.CallIDs) > 0):
		diags = append(diags, errorf("-revoke takes only -tool NAME, not call ids or -all: a decision on a call cannot be withdrawn"))
	case a.All && len(a.CallIDs) > 0:
		diags = append(diags, errorf("Approve takes call ids or -all, not both"))
	case len(a.Tools) > 0:
	case !a.All && len(a.CallIDs) == 0 && a.Reject:
		diags = append(diags, errorf("Reject needs the ids of the calls to reject, or -tool NAME for every later call of a tool; agentctl show %s lists them", a.Run))
	case !a.All && len(a.CallIDs) == 0:
		diags = append(diags, errorf("Approve needs the ids of the calls to approve, or -all, or -tool NAME for every later call of a tool; agentctl show %s lists them", a.Run))
	}
	for _, t := range a.Tools {
		if strings.TrimSpace(t) == "" {
			diags = append(diags, errorf("-tool needs a tool name, such as -tool exec_command"))
			break
		}
	}
	return a, diags
}
