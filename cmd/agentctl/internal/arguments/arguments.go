// Package arguments parses the command-line arguments of each agentctl
// command into a typed value, apart from what the commands do (package
// main and the engine) and how results are shown (package views).
//
// Each command has a Parse function, as ParseValidate, that takes the
// arguments after the command's name and returns the command's arguments
// and the problems found, as diagnostics that say what is wrong and how to
// fix it. Parse functions print nothing.
//
// Flags are Go-style, parsed by the standard flag package: -flag and
// --flag are the same, and flags may follow positional arguments.
package arguments

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// ViewType is how a command shows its result.
type ViewType rune

const (
	// ViewHuman is text for a person (the default).
	ViewHuman ViewType = 'H'
	// ViewJSON is JSON for programs (-json).
	ViewJSON ViewType = 'J'
	// ViewRaw is a value printed exactly, with no quoting (output -raw).
	ViewRaw ViewType = 'R'
)

func (t ViewType) String() string {
	switch t {
	case ViewHuman:
		return "human"
	case ViewJSON:
		return "json"
	case ViewRaw:
		return "raw"
	}
	return fmt.Sprintf("ViewType(%d)", rune(t))
}

// viewType is ViewJSON when -json was given, ViewHuman otherwise.
func viewType(json bool) ViewType {
	if json {
		return ViewJSON
	}
	return ViewHuman
}

// Usage is the Extra of a diagnostic after which the command's usage
// helps: -h or -help was given (Help), or the flag package rejected a
// flag. Flags are the command's flags, for the usage text.
type Usage struct {
	Flags *flag.FlagSet
	Help  bool
}

// UsageOf returns the Usage of the first diagnostic that carries one.
func UsageOf(diags hcl.Diagnostics) (*Usage, bool) {
	for _, d := range diags {
		if u, ok := d.Extra.(*Usage); ok {
			return u, true
		}
	}
	return nil, false
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// Vars are the variable flags of the commands that load a configuration.
type Vars struct {
	Vars     []string
	VarFiles []string
}

func (v *Vars) register(fs *flag.FlagSet) {
	fs.Var((*stringList)(&v.Vars), "var", "Set a variable: -var 'NAME=VALUE'. Repeatable.")
	fs.Var((*stringList)(&v.VarFiles), "var-file", "Load variable values from an HCL or JSON file. Repeatable.")
}

// newFlagSet returns a flag set that prints nothing and reports errors
// to its caller.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args with fs, accepting flags interspersed with positional
// arguments ("--" ends the flags), and returns the positional arguments.
// A rejected flag or a help request is a diagnostic carrying a Usage.
func parse(fs *flag.FlagSet, args []string) ([]string, hcl.Diagnostics) {
	pos, err := positional(fs, args)
	if err != nil {
		return nil, flagDiags(fs, err)
	}
	return pos, nil
}

// flagDiags turns an error of fs.Parse into a diagnostic that says which
// command rejected what, and where to find its options.
func flagDiags(fs *flag.FlagSet, err error) hcl.Diagnostics {
	if errors.Is(err, flag.ErrHelp) {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Help requested",
			Extra:    &Usage{Flags: fs, Help: true},
		}}
	}
	cmd := "agentctl"
	if fs.Name() != cmd {
		cmd += " " + fs.Name()
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid option for " + cmd,
		Detail:   fmt.Sprintf("%s. Run %s -help for the options.", err, cmd),
		Extra:    &Usage{Flags: fs},
	}}
}

func positional(fs *flag.FlagSet, rest []string) ([]string, error) {
	var pos []string
	for len(rest) > 0 {
		a := rest[0]
		if a == "--" {
			pos = append(pos, rest[1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			if err := fs.Parse(rest); err != nil {
				return nil, err
			}
			left := fs.Args()
			// The flag package consumes a "--" that ends the flags: what
			// follows it is positional, flags or not.
			if n := len(rest) - len(left); n > 0 && rest[n-1] == "--" {
				pos = append(pos, left...)
				break
			}
			rest = left
			continue
		}
		pos = append(pos, a)
		rest = rest[1:]
	}
	return pos, nil
}

// errorf returns an error diagnostic with no source range.
func errorf(format string, a ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: fmt.Sprintf(format, a...)}
}

// onePath is the configuration PATH of the commands that take at most
// one, "." when none is given.
func onePath(pos []string) (string, hcl.Diagnostics) {
	switch len(pos) {
	case 0:
		return ".", nil
	case 1:
		return pos[0], nil
	}
	return ".", hcl.Diagnostics{errorf("Too many arguments: expected at most one configuration PATH, got %s", strings.Join(pos, " "))}
}

// Global are the flags given before the command.
type Global struct {
	Chdir   string
	NoColor bool
	Version bool
}

// ParseGlobal parses the global flags, which come before the command,
// and returns them and the arguments from the command's name on.
func ParseGlobal(args []string) (*Global, []string, hcl.Diagnostics) {
	fs := newFlagSet("agentctl")
	g := NewGlobal(fs)
	if err := fs.Parse(args); err != nil {
		return g, nil, flagDiags(fs, err)
	}
	return g, fs.Args(), nil
}

// ParseGroup parses the arguments of a command that only groups
// subcommands (state, tool): it has no flags but -h, and the first
// argument names the subcommand, whose arguments follow.
func ParseGroup(name string, args []string) ([]string, hcl.Diagnostics) {
	fs := newFlagSet(name)
	if err := fs.Parse(args); err != nil {
		return nil, flagDiags(fs, err)
	}
	return fs.Args(), nil
}

// NewGlobal registers the global flags on fs.
func NewGlobal(fs *flag.FlagSet) *Global {
	g := &Global{}
	fs.StringVar(&g.Chdir, "chdir", "", "Switch to DIR before running the command.")
	fs.BoolVar(&g.NoColor, "no-color", false, "Disable color in the output.")
	fs.BoolVar(&g.Version, "version", false, "Show the version (same as the version command).")
	fs.BoolVar(&g.Version, "v", false, "Show the version.")
	return g
}
