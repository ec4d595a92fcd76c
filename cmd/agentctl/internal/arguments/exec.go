package arguments

import (
	"flag"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Exec are the arguments of agentctl exec.
type Exec struct {
	Backend
	// Address is the sandbox to run the command in.
	Address string
	// Argv is the command and its arguments, kept verbatim after "--".
	Argv    []string
	NoColor bool
	// Interactive (-i) keeps standard input attached while the command
	// runs; TTY (-t) runs it on a terminal. -it is both, as in docker exec.
	Interactive, TTY bool
}

// ParseExec parses exec's arguments: flags, the sandbox ADDR and the
// command (after "--", so that its own flags are not agentctl's).
func ParseExec(args []string) (*Exec, hcl.Diagnostics) {
	a := &Exec{}
	fs := newFlagSet("exec")
	a.Backend.register(fs, true)
	registerNoColor(fs, &a.NoColor)
	fs.BoolVar(&a.Interactive, "i", false, "Keep standard input attached while the command runs.")
	fs.BoolVar(&a.TTY, "t", false, "Run the command on a terminal (with -i, for a shell: -it).")
	both := false
	fs.BoolVar(&both, "it", false, "Both -i and -t, as in docker exec -it.")
	fs.BoolVar(&both, "ti", false, "Both -i and -t.")
	pos, diags := parse(fs, args)
	if both {
		a.Interactive, a.TTY = true, true
	}
	if diags.HasErrors() {
		return a, diags
	}
	if len(pos) < 2 {
		return a, hcl.Diagnostics{errorf("Exec needs a sandbox address and a command: agentctl exec sandbox.NAME -- CMD [ARG...]")}
	}
	a.Address, a.Argv = pos[0], pos[1:]
	return a, nil
}

// ToolCall are the arguments of agentctl tool call.
type ToolCall struct {
	Backend
	// Name is the tool to run.
	Name string
	// Dir is the host directory to run the tool against (-dir), or
	// Sandbox the managed sandbox to run it in (-sandbox): exactly one.
	Dir     string
	Sandbox string
	// Input is the tool's arguments as JSON (-args); empty reads them
	// from standard input.
	Input   string
	NoColor bool
}

// ParseToolCall parses tool call's arguments: flags, with exactly one of
// -dir and -sandbox, and one tool NAME.
func ParseToolCall(args []string) (*ToolCall, hcl.Diagnostics) {
	a := &ToolCall{}
	fs := newFlagSet("tool call")
	a.Backend.register(fs, true)
	registerNoColor(fs, &a.NoColor)
	fs.StringVar(&a.Dir, "dir", "", "Run the tool against this host directory (no isolation).")
	fs.StringVar(&a.Sandbox, "sandbox", "", "Run the tool in this managed sandbox (e.g. sandbox.analysis).")
	fs.StringVar(&a.Input, "args", "", "The tool's arguments as JSON (default: read from standard input).")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	if len(pos) != 1 {
		return a, hcl.Diagnostics{errorf("Tool call needs exactly one tool NAME, such as apply_patch")}
	}
	a.Name = pos[0]
	if (a.Dir == "") == (a.Sandbox == "") {
		return a, hcl.Diagnostics{errorf("Tool call needs exactly one of -dir DIR (a host directory, no isolation) or -sandbox ADDR (a managed sandbox)")}
	}
	if a.Dir != "" {
		// A host directory has no state or lock (the configuration still
		// supplies command tools): those flags would be ignored.
		var ignored []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "state", "lock", "lock-timeout":
				ignored = append(ignored, "-"+f.Name)
			}
		})
		if len(ignored) > 0 {
			return a, hcl.Diagnostics{errorf("Tool call -dir uses no state, so %s would be ignored: remove it, or use -sandbox ADDR", strings.Join(ignored, ", "))}
		}
	}
	return a, nil
}
