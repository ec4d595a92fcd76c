package arguments

import "github.com/hashicorp/hcl/v2"

// Fmt are the arguments of agentctl fmt.
type Fmt struct {
	// Paths are the files and directories to format ("-" is standard
	// input); "." when none is given.
	Paths     []string
	Check     bool
	Diff      bool
	Recursive bool
	// Write and List are on unless turned off; -check turns Write off.
	Write   bool
	List    bool
	NoColor bool
}

// ParseFmt parses fmt's arguments: flags and any number of paths.
func ParseFmt(args []string) (*Fmt, hcl.Diagnostics) {
	a := &Fmt{}
	fs := newFlagSet("fmt")
	fs.BoolVar(&a.Check, "check", false, "Check whether files are formatted; exit 3 when some are not. Nothing is written.")
	fs.BoolVar(&a.Diff, "diff", false, "Show the formatting changes as a unified diff.")
	fs.BoolVar(&a.Recursive, "recursive", false, "Also format files in subdirectories.")
	fs.BoolVar(&a.Write, "write", true, "Write the formatted result back to the files.")
	fs.BoolVar(&a.List, "list", true, "List the files whose formatting differs.")
	fs.BoolVar(&a.NoColor, "no-color", false, "Disable color in the output.")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	a.Paths = pos
	if len(a.Paths) == 0 {
		a.Paths = []string{"."}
	}
	if a.Check {
		// -check only reports: it never writes, whatever -write says.
		a.Write = false
	}
	return a, nil
}
