// Package arguments parses the command-line arguments of each agentctl
// command into typed values, apart from what the commands do and how
// results are shown (package views).
//
// Flags are Go-style, parsed by the standard flag package: -flag and
// --flag are the same, and flags may follow positional arguments.
package arguments

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// Vars are the variable flags shared by commands that load a configuration.
type Vars struct {
	Vars     []string
	VarFiles []string
}

func (v *Vars) register(fs *flag.FlagSet) {
	fs.Var((*stringList)(&v.Vars), "var", "Set a variable: -var 'NAME=VALUE'. Repeatable.")
	fs.Var((*stringList)(&v.VarFiles), "var-file", "Load variable values from an HCL or JSON file. Repeatable.")
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}

// Positional finishes parsing rest (the arguments the flag package left
// after the first positional argument), accepting flags interspersed with
// positional arguments. "--" ends flag parsing.
func Positional(fs *flag.FlagSet, rest []string) ([]string, error) {
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

// Global are the flags given before the subcommand.
type Global struct {
	Chdir   string
	NoColor bool
	Version bool
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

// Validate are the arguments of agentctl validate.
type Validate struct {
	Path    string
	JSON    bool
	NoColor bool
	Vars
}

// NewValidate returns the validate arguments and their flag set.
func NewValidate(out io.Writer) (*Validate, *flag.FlagSet) {
	a := &Validate{}
	fs := newFlagSet("validate", out)
	fs.BoolVar(&a.JSON, "json", false, "Print the result as JSON (as terraform validate -json).")
	fs.BoolVar(&a.NoColor, "no-color", false, "Disable color in the output.")
	a.Vars.register(fs)
	return a, fs
}

// Finish parses the remaining arguments: at most one PATH.
func (a *Validate) Finish(fs *flag.FlagSet, rest []string) error {
	pos, err := Positional(fs, rest)
	if err != nil {
		return err
	}
	a.Path, err = onePath(pos)
	return err
}

func onePath(pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return ".", nil
	case 1:
		return pos[0], nil
	}
	return "", fmt.Errorf("too many arguments: expected at most one configuration PATH, got %s", strings.Join(pos, " "))
}

// Fmt are the arguments of agentctl fmt.
type Fmt struct {
	Paths     []string
	Check     bool
	Diff      bool
	Recursive bool
	Write     bool
	List      bool
	NoColor   bool
}

// NewFmt returns the fmt arguments and their flag set.
func NewFmt(out io.Writer) (*Fmt, *flag.FlagSet) {
	a := &Fmt{}
	fs := newFlagSet("fmt", out)
	fs.BoolVar(&a.Check, "check", false, "Check whether files are formatted; exit 3 when some are not. Nothing is written.")
	fs.BoolVar(&a.Diff, "diff", false, "Show the formatting changes as a unified diff.")
	fs.BoolVar(&a.Recursive, "recursive", false, "Also format files in subdirectories.")
	fs.BoolVar(&a.Write, "write", true, "Write the formatted result back to the files.")
	fs.BoolVar(&a.List, "list", true, "List the files whose formatting differs.")
	fs.BoolVar(&a.NoColor, "no-color", false, "Disable color in the output.")
	return a, fs
}

// Finish parses the remaining arguments: any number of paths ("-" is
// standard input).
func (a *Fmt) Finish(fs *flag.FlagSet, rest []string) error {
	pos, err := Positional(fs, rest)
	if err != nil {
		return err
	}
	a.Paths = pos
	if len(a.Paths) == 0 {
		a.Paths = []string{"."}
	}
	if a.Check {
		a.Write = false
	}
	return nil
}

// Graph are the arguments of agentctl graph.
type Graph struct {
	Path    string
	Type    string // plan | agents
	Format  string // dot | mermaid
	NoColor bool
	Vars
}

// NewGraph returns the graph arguments and their flag set.
func NewGraph(out io.Writer) (*Graph, *flag.FlagSet) {
	a := &Graph{}
	fs := newFlagSet("graph", out)
	fs.StringVar(&a.Type, "type", "plan", "Which graph: plan (runs and sandboxes) or agents (handoffs and agent tools).")
	fs.StringVar(&a.Format, "format", "dot", "Output format: dot or mermaid.")
	fs.BoolVar(&a.NoColor, "no-color", false, "Disable color in the output.")
	a.Vars.register(fs)
	return a, fs
}

// Finish parses the remaining arguments and checks the enumerations.
func (a *Graph) Finish(fs *flag.FlagSet, rest []string) error {
	pos, err := Positional(fs, rest)
	if err != nil {
		return err
	}
	if a.Path, err = onePath(pos); err != nil {
		return err
	}
	if a.Type != "plan" && a.Type != "agents" {
		return fmt.Errorf("invalid -type %q: use -type=plan or -type=agents", a.Type)
	}
	if a.Format != "dot" && a.Format != "mermaid" {
		return fmt.Errorf("invalid -format %q: use -format=dot or -format=mermaid", a.Format)
	}
	return nil
}

// Version are the arguments of agentctl version.
type Version struct {
	JSON bool
}

// NewVersion returns the version arguments and their flag set.
func NewVersion(out io.Writer) (*Version, *flag.FlagSet) {
	a := &Version{}
	fs := newFlagSet("version", out)
	fs.BoolVar(&a.JSON, "json", false, "Print the version as JSON.")
	return a, fs
}

// Finish parses the remaining arguments: none are accepted.
func (a *Version) Finish(fs *flag.FlagSet, rest []string) error {
	pos, err := Positional(fs, rest)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("version takes no arguments")
	}
	return nil
}
