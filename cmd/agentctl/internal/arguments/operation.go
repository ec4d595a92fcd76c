package arguments

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// State are the flags of every command that reads or writes the state.
type State struct {
	// StatePath overrides the state file (-state).
	StatePath   string
	LockTimeout time.Duration
	Lock        bool
}

func (s *State) register(fs *flag.FlagSet) {
	fs.StringVar(&s.StatePath, "state", "", "Path of the state file (default: .agentctl/state.json beside the configuration).")
	fs.DurationVar(&s.LockTimeout, "lock-timeout", 0, "Wait this long for the state lock (e.g. 30s).")
	fs.BoolVar(&s.Lock, "lock", true, "Lock the state while the command runs. -lock=false is dangerous when others may apply at the same time.")
}

// Operation are the arguments of plan, apply and destroy.
type Operation struct {
	Vars
	State
	// Path is the configuration (or, for apply, a saved plan file).
	Path             string
	Targets          []string
	Replace          []string
	Refresh          bool
	Parallelism      int
	JSON             bool
	NoColor          bool
	AutoApprove      bool
	DetailedExitcode bool
	Out              string
	Destroy          bool
}

// NewOperation returns the arguments of plan, apply or destroy (name).
func NewOperation(name string, out io.Writer) (*Operation, *flag.FlagSet) {
	a := &Operation{}
	fs := newFlagSet(name, out)
	a.Vars.register(fs)
	a.State.register(fs)
	fs.Var((*stringList)(&a.Targets), "target", "Limit the operation to this address and what it depends on. Repeatable.")
	fs.Var((*stringList)(&a.Replace), "replace", "Force this run to re-run (or this sandbox to be replaced). Repeatable.")
	fs.BoolVar(&a.Refresh, "refresh", true, "Ask the providers whether the sandboxes still exist before planning.")
	fs.IntVar(&a.Parallelism, "parallelism", 0, "Limit the number of concurrent operations (default: the agentctl block's, else 10).")
	fs.BoolVar(&a.JSON, "json", false, "Print newline-delimited JSON events instead of text.")
	fs.BoolVar(&a.NoColor, "no-color", false, "Disable color in the output.")
	switch name {
	case "plan":
		fs.BoolVar(&a.DetailedExitcode, "detailed-exitcode", false, "Exit 0 when there are no changes, 1 on error, 2 when there are changes.")
		fs.StringVar(&a.Out, "out", "", "Save the plan to this file for a later agentctl apply FILE.")
		fs.BoolVar(&a.Destroy, "destroy", false, "Plan to destroy every sandbox and run.")
	case "apply", "destroy":
		fs.BoolVar(&a.AutoApprove, "auto-approve", false, "Skip the interactive approval.")
	}
	return a, fs
}

// Finish parses the remaining arguments: at most one PATH.
func (a *Operation) Finish(fs *flag.FlagSet, rest []string) error {
	pos, err := Positional(fs, rest)
	if err != nil {
		return err
	}
	if a.Path, err = onePath(pos); err != nil {
		return err
	}
	if a.Parallelism < 0 {
		return fmt.Errorf("-parallelism must be at least 1, got %d", a.Parallelism)
	}
	for _, r := range a.Replace {
		if !strings.HasPrefix(r, "run.") && !strings.HasPrefix(r, "sandbox.") {
			return fmt.Errorf("-replace=%s: expected a run or sandbox address such as run.NAME", r)
		}
	}
	return nil
}

// Inspect are the arguments of the commands that read the state of a
// configuration given by -config (show, output, state, exec, tool).
type Inspect struct {
	Vars
	State
	Config  string
	JSON    bool
	Raw     bool
	NoColor bool
	// Args are the positional arguments.
	Args []string
	// Tool-call flags.
	Dir      string
	Sandbox  string
	ToolArgs string
}

// NewInspect returns the arguments of show, output, state, exec,
// force-unlock and tool (name).
func NewInspect(name string, out io.Writer) (*Inspect, *flag.FlagSet) {
	a := &Inspect{}
	fs := newFlagSet(name, out)
	a.Vars.register(fs)
	a.State.register(fs)
	fs.StringVar(&a.Config, "config", ".", "The configuration file or directory whose state to use.")
	fs.BoolVar(&a.NoColor, "no-color", false, "Disable color in the output.")
	switch name {
	case "show", "output", "state list", "state show":
		fs.BoolVar(&a.JSON, "json", false, "Print JSON.")
	}
	if name == "output" {
		fs.BoolVar(&a.Raw, "raw", false, "Print a string output's value with no quoting, for shell scripts.")
	}
	if name == "tool call" {
		fs.StringVar(&a.Dir, "dir", "", "Run the tool against this host directory (no isolation).")
		fs.StringVar(&a.Sandbox, "sandbox", "", "Run the tool in this managed sandbox (e.g. sandbox.analysis).")
		fs.StringVar(&a.ToolArgs, "args", "", "The tool's arguments as JSON (default: read from standard input).")
	}
	return a, fs
}

// Finish parses the remaining arguments into Args; exec keeps everything
// after "--" verbatim.
func (a *Inspect) Finish(fs *flag.FlagSet, rest []string) error {
	pos, err := Positional(fs, rest)
	if err != nil {
		return err
	}
	a.Args = pos
	return nil
}
