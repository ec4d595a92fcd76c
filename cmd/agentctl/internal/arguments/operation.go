package arguments

import (
	"flag"
	"github.com/agentctl/agentctl/addrs"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// State are the flags of every command that reads or writes the state.
type State struct {
	// StatePath overrides the state file (-state).
	StatePath   string
	LockTimeout time.Duration
	Lock        bool
}

func (s *State) register(fs *flag.FlagSet) {
	s.registerPath(fs)
	fs.DurationVar(&s.LockTimeout, "lock-timeout", 0, "Wait this long for the state lock (e.g. 30s).")
	fs.BoolVar(&s.Lock, "lock", true, "Lock the state while the command runs. -lock=false is dangerous when others may apply at the same time.")
}

// registerPath adds -state alone, for the commands that only read the
// state (they never lock it: state writes are atomic renames).
func (s *State) registerPath(fs *flag.FlagSet) {
	fs.StringVar(&s.StatePath, "state", "", "Path of the state file (default: .agentctl/state.json beside the configuration).")
}

// Operation are the arguments that plan, apply and destroy share.
type Operation struct {
	// Path is the configuration (or, for apply, a saved plan file).
	Path  string
	Vars  Vars
	State State
	// Targets limit the operation to these addresses (-target).
	Targets []string
	// Excludes leave these addresses, and what depends on them, out of
	// the operation (-exclude).
	Excludes []string
	// Replace are the runs and sandboxes forced to re-run or be replaced.
	Replace []string
	Refresh bool
	// RefreshOnly plans (and, for apply, records in the state) only what
	// changed outside agentctl: plan and apply -refresh-only.
	RefreshOnly bool
	// Parallelism is -parallelism; 0 leaves it to the configuration.
	Parallelism int
	ViewType    ViewType
	NoColor     bool
}

// register adds the shared flags; jsonOut receives -json.
func (o *Operation) register(fs *flag.FlagSet, jsonOut *bool) {
	o.Vars.register(fs)
	o.State.register(fs)
	fs.Var((*stringList)(&o.Targets), "target", "Limit the operation to this address and what it depends on. Repeatable.")
	fs.Var((*stringList)(&o.Excludes), "exclude", "Leave this address, and everything that depends on it, out of the operation. Repeatable; not with -target.")
	fs.Var((*stringList)(&o.Replace), "replace", "Force this run to re-run (or this sandbox to be replaced). Repeatable.")
	fs.BoolVar(&o.Refresh, "refresh", true, "Ask the providers whether the sandboxes still exist before planning.")
	fs.IntVar(&o.Parallelism, "parallelism", 0, "Limit the number of concurrent operations (default: the agentctl block's, else 10).")
	fs.BoolVar(jsonOut, "json", false, "Print newline-delimited JSON events instead of text.")
	fs.BoolVar(&o.NoColor, "no-color", false, "Disable color in the output.")
}

// finish checks the shared flags and takes the configuration PATH from
// the positional arguments.
func (o *Operation) finish(pos []string, jsonOut bool) hcl.Diagnostics {
	o.ViewType = viewType(jsonOut)
	path, diags := onePath(pos)
	o.Path = path
	if o.Parallelism < 0 {
		diags = append(diags, errorf("-parallelism must be at least 1, got %d", o.Parallelism))
	}
	if o.RefreshOnly {
		diags = append(diags, o.checkRefreshOnly()...)
	}
	if len(o.Targets) > 0 && len(o.Excludes) > 0 {
		diags = append(diags, errorf("-target and -exclude cannot be used together: name what to include with -target, or what to leave out with -exclude"))
	}
	for _, x := range o.Excludes {
		if _, err := addrs.ParseInstance(x); err != nil {
			diags = append(diags, errorf("-exclude=%s: expected a run or sandbox address such as run.NAME or sandbox.NAME[\"key\"]", x))
		}
	}
	for _, r := range o.Replace {
		if _, err := addrs.ParseInstance(r); err != nil {
			diags = append(diags, errorf("-replace=%s: expected a run or sandbox address such as run.NAME", r))
		}
	}
	return diags
}

// registerRefreshOnly adds -refresh-only (plan and apply).
func (o *Operation) registerRefreshOnly(fs *flag.FlagSet) {
	fs.BoolVar(&o.RefreshOnly, "refresh-only", false, "Only compare the state with the sandboxes at their providers (deleted, stopped or started outside agentctl); apply records the differences in the state. No sandbox is changed and no run executes.")
}

// checkRefreshOnly refuses the flags -refresh-only cannot honour.
func (o *Operation) checkRefreshOnly() hcl.Diagnostics {
	var diags hcl.Diagnostics
	if !o.Refresh {
		diags = append(diags, errorf("-refresh-only and -refresh=false cannot be used together: -refresh-only asks the providers about every sandbox"))
	}
	if len(o.Replace) > 0 {
		diags = append(diags, errorf("-refresh-only and -replace cannot be used together: a refresh-only plan replaces nothing; drop -replace, or plan without -refresh-only"))
	}
	return diags
}

// Plan are the arguments of agentctl plan.
type Plan struct {
	Operation
	// DetailedExitcode makes a plan with changes exit 2.
	DetailedExitcode bool
	// Out is the file to save the plan to.
	Out string
	// Destroy plans to destroy everything.
	Destroy bool
}

// ParsePlan parses plan's arguments: flags and at most one PATH.
func ParsePlan(args []string) (*Plan, hcl.Diagnostics) {
	a := &Plan{Operation: Operation{Path: ".", ViewType: ViewHuman}}
	var jsonOut bool
	fs := newFlagSet("plan")
	a.register(fs, &jsonOut)
	fs.BoolVar(&a.DetailedExitcode, "detailed-exitcode", false, "Exit 0 when there are no changes, 1 on error, 2 when there are changes.")
	fs.StringVar(&a.Out, "out", "", "Save the plan to this file for a later agentctl apply FILE.")
	fs.BoolVar(&a.Destroy, "destroy", false, "Plan to destroy every sandbox and run.")
	a.registerRefreshOnly(fs)
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	diags = a.finish(pos, jsonOut)
	if a.Destroy && a.RefreshOnly {
		diags = append(diags, errorf("-destroy and -refresh-only cannot be used together: choose one kind of plan"))
	}
	return a, diags
}

// Apply are the arguments of agentctl apply and agentctl destroy.
type Apply struct {
	Operation
	AutoApprove bool
	// Input asks on the terminal (-input, default true; apply only):
	// for the apply's approval, and about tool calls that need approval.
	// Without it, or with -json, nothing is asked: the apply needs
	// -auto-approve or a saved plan; without it, a terminal or with
	// -json, tool calls that need approval are deferred.
	Input bool
	// Destroy is set for agentctl destroy.
	Destroy bool
	// Record is the directory -record names: every model exchange of the
	// apply is recorded there as cassettes; "" records nothing.
	Record string
}

// ParseApply parses apply's arguments: flags and at most one PATH, a
// configuration or a saved plan file.
func ParseApply(args []string) (*Apply, hcl.Diagnostics) {
	return parseApply("apply", args)
}

// ParseDestroy parses destroy's arguments, the same as apply's; the
// result has Destroy set.
func ParseDestroy(args []string) (*Apply, hcl.Diagnostics) {
	a, diags := parseApply("destroy", args)
	a.Destroy = true
	return a, diags
}

func parseApply(name string, args []string) (*Apply, hcl.Diagnostics) {
	a := &Apply{Operation: Operation{Path: ".", ViewType: ViewHuman}}
	var jsonOut bool
	fs := newFlagSet(name)
	a.register(fs, &jsonOut)
	fs.BoolVar(&a.AutoApprove, "auto-approve", false, "Skip the interactive approval.")
	if name == "apply" {
		fs.BoolVar(&a.Input, "input", true, "Ask on the terminal: for the apply's approval and about tool calls that need approval; false asks nothing (add -auto-approve) and defers those calls (agentctl approve decides later).")
		a.registerRefreshOnly(fs)
		fs.StringVar(&a.Record, "record", "", "Record every model request and response of the apply as cassettes in `DIR` (credentials stripped), for provider \"openai\" { replay = DIR }.")
	}
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	return a, a.finish(pos, jsonOut)
}
