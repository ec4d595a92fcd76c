package arguments

import "github.com/hashicorp/hcl/v2"

// Test are the arguments of agentctl test.
type Test struct {
	// Path is the configuration under test, a file or a directory ("."
	// by default).
	Path string
	// Filter limits the run to these test files (repeatable, paths as
	// given).
	Filter []string
	Vars   Vars
	// Parallelism bounds concurrent graph nodes in each run (0 = the
	// configuration's).
	Parallelism int
	// Replay is the directory -replay names: recorded model exchanges
	// the runs are answered from, offline.
	Replay   string
	ViewType ViewType
	NoColor  bool
}

// ParseTest parses test's arguments: flags and at most one PATH.
func ParseTest(args []string) (*Test, hcl.Diagnostics) {
	a := &Test{Path: ".", ViewType: ViewHuman}
	var jsonOut bool
	var filter stringList
	fs := newFlagSet("test")
	fs.BoolVar(&jsonOut, "json", false, "Print newline-delimited JSON events (as terraform test -json).")
	fs.BoolVar(&a.NoColor, "no-color", false, "Disable color in the output.")
	fs.Var(&filter, "filter", "Run only this test file (repeatable).")
	fs.IntVar(&a.Parallelism, "parallelism", 0, "Limit the number of concurrent operations in each run.")
	fs.StringVar(&a.Replay, "replay", "", "Answer every model call over HTTP from the cassettes in `DIR` (recorded by apply -record), with no network; a request that was not recorded fails its run.")
	a.Vars.register(fs)
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	a.ViewType = viewType(jsonOut)
	a.Filter = filter
	a.Path, diags = onePath(pos)
	return a, diags
}
