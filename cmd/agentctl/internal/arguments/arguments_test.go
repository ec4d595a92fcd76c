package arguments

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
)

// parseCase is one row of a ParseX table test.
type parseCase[A any] struct {
	name string
	args []string
	// want is the parsed arguments, checked when there are no errors.
	want *A
	// diags are the expected diagnostics, in order: each one's summary
	// and, on the next line, its detail if it has one.
	diags []string
	// usage is whether the diagnostics carry the command's usage (a
	// rejected flag or -h).
	usage bool
}

func runParseCases[A any](t *testing.T, parse func([]string) (*A, hcl.Diagnostics), cases []parseCase[A]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, diags := parse(tc.args)
			if got == nil {
				t.Fatal("parse returned nil arguments")
			}
			if d := cmp.Diff(tc.diags, describe(diags)); d != "" {
				t.Errorf("diagnostics (-want +got):\n%s", d)
			}
			for _, d := range diags {
				if d.Severity != hcl.DiagError {
					t.Errorf("diagnostic %q has severity %v, want an error", d.Summary, d.Severity)
				}
			}
			if _, ok := UsageOf(diags); ok != tc.usage {
				t.Errorf("usage attached = %v, want %v", ok, tc.usage)
			}
			if tc.want != nil && !diags.HasErrors() {
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("arguments (-want +got):\n%s", d)
				}
			}
			if tc.want == nil && len(tc.diags) == 0 {
				t.Fatal("test case checks nothing")
			}
		})
	}
}

func describe(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		s := d.Summary
		if d.Detail != "" {
			s += "\n" + d.Detail
		}
		out = append(out, s)
	}
	return out
}

// flagErr is the diagnostic of a flag that the flag package rejected with
// message msg.
func flagErr(command, msg string) string {
	return "Invalid option for agentctl " + command + "\n" + msg + ". Run agentctl " + command + " -help for the options."
}

// stateDefaults are the -state, -lock and -lock-timeout defaults.
var stateDefaults = State{Lock: true}

func TestUsageOfHelp(t *testing.T) {
	for _, help := range []string{"-h", "-help", "--help"} {
		_, diags := ParseValidate([]string{"dir", help})
		u, ok := UsageOf(diags)
		if !ok || !u.Help {
			t.Fatalf("%s: want a help request, got %v", help, diags)
		}
		if u.Flags.Lookup("json") == nil || u.Flags.Lookup("var-file") == nil {
			t.Errorf("%s: the usage's flags lack validate's -json and -var-file", help)
		}
	}
	// After "--" everything is positional, -h included.
	a, diags := ParseFmt([]string{"--", "-h"})
	if diags.HasErrors() || a.Paths[0] != "-h" {
		t.Errorf(`fmt -- -h: got %v, %v; want the path "-h"`, a.Paths, diags)
	}
}

func TestParseValidate(t *testing.T) {
	runParseCases(t, ParseValidate, []parseCase[Validate]{
		{name: "defaults", args: nil, want: &Validate{Path: ".", ViewType: ViewHuman}},
		{
			name: "all flags",
			args: []string{"-json", "-no-color", "-var", "a=1", "-var=b=2", "-var-file", "x.vars.hcl", "conf"},
			want: &Validate{Path: "conf", ViewType: ViewJSON, NoColor: true, Vars: Vars{Vars: []string{"a=1", "b=2"}, VarFiles: []string{"x.vars.hcl"}}},
		},
		{name: "flags after PATH, double dash", args: []string{"conf", "--json"}, want: &Validate{Path: "conf", ViewType: ViewJSON}},
		{name: "a PATH after --", args: []string{"--", "-odd"}, want: &Validate{Path: "-odd", ViewType: ViewHuman}},
		{name: "unknown flag", args: []string{"-bogus"}, diags: []string{flagErr("validate", "flag provided but not defined: -bogus")}, usage: true},
		{name: "unknown flag after PATH", args: []string{"conf", "-bogus"}, diags: []string{flagErr("validate", "flag provided but not defined: -bogus")}, usage: true},
		{name: "flag without its value", args: []string{"-var"}, diags: []string{flagErr("validate", "flag needs an argument: -var")}, usage: true},
		{name: "two PATHs", args: []string{"a", "b"}, diags: []string{"Too many arguments: expected at most one configuration PATH, got a b"}},
		{name: "help", args: []string{"-help"}, diags: []string{"Help requested"}, usage: true},
	})
}

func TestParseFmt(t *testing.T) {
	runParseCases(t, ParseFmt, []parseCase[Fmt]{
		{name: "defaults", want: &Fmt{Paths: []string{"."}, Write: true, List: true}},
		{name: "paths and stdin", args: []string{"a.hcl", "-", "dir"}, want: &Fmt{Paths: []string{"a.hcl", "-", "dir"}, Write: true, List: true}},
		{
			name: "every flag",
			args: []string{"-diff", "-recursive", "-write=false", "-list=false", "-no-color", "dir"},
			want: &Fmt{Paths: []string{"dir"}, Diff: true, Recursive: true, NoColor: true},
		},
		// -check only reports, even when -write is given too.
		{name: "check turns write off", args: []string{"-check", "-write=true"}, want: &Fmt{Paths: []string{"."}, Check: true, List: true}},
		{name: "unknown flag", args: []string{"-json"}, diags: []string{flagErr("fmt", "flag provided but not defined: -json")}, usage: true},
		{name: "bad boolean", args: []string{"-write=maybe"}, diags: []string{flagErr("fmt", `invalid boolean value "maybe" for -write: parse error`)}, usage: true},
	})
}

func TestParseGraph(t *testing.T) {
	runParseCases(t, ParseGraph, []parseCase[Graph]{
		{name: "defaults", want: &Graph{Path: ".", Type: "plan", Format: "dot"}},
		{name: "agents as mermaid", args: []string{"conf", "-type=agents", "-format", "mermaid", "-var=a=1"}, want: &Graph{Path: "conf", Type: "agents", Format: "mermaid", Vars: Vars{Vars: []string{"a=1"}}}},
		{name: "bad type", args: []string{"-type=nope"}, diags: []string{`Invalid -type "nope": use -type=plan or -type=agents`}},
		{name: "bad type and format", args: []string{"-type=nope", "-format=svg"}, diags: []string{
			`Invalid -type "nope": use -type=plan or -type=agents`,
			`Invalid -format "svg": use -format=dot or -format=mermaid`,
		}},
		{name: "two PATHs", args: []string{"a", "b", "-type=agents"}, diags: []string{"Too many arguments: expected at most one configuration PATH, got a b"}},
		{name: "unknown flag", args: []string{"-json"}, diags: []string{flagErr("graph", "flag provided but not defined: -json")}, usage: true},
	})
}

func TestParseVersion(t *testing.T) {
	runParseCases(t, ParseVersion, []parseCase[Version]{
		{name: "human", want: &Version{ViewType: ViewHuman}},
		{name: "json", args: []string{"-json"}, want: &Version{ViewType: ViewJSON}},
		{name: "an argument", args: []string{"now"}, diags: []string{"Version takes no arguments"}},
		{name: "unknown flag", args: []string{"-short"}, diags: []string{flagErr("version", "flag provided but not defined: -short")}, usage: true},
	})
}

func TestParsePlan(t *testing.T) {
	defaults := Operation{Path: ".", State: stateDefaults, Refresh: true, ViewType: ViewHuman}
	with := func(f func(*Plan)) *Plan {
		p := &Plan{Operation: defaults}
		f(p)
		return p
	}
	runParseCases(t, ParsePlan, []parseCase[Plan]{
		{name: "defaults", want: with(func(*Plan) {})},
		{
			name: "every flag",
			args: []string{
				"conf", "-json", "-no-color", "-target=run.a", "-target", "sandbox.b", "-replace=run.c",
				"-refresh=false", "-parallelism=3", "-state=s.json", "-lock=false", "-lock-timeout=30s",
				"-var", "a=1", "-var-file=v.hcl", "-detailed-exitcode", "-out=p.plan", "-destroy",
			},
			want: with(func(p *Plan) {
				p.Path, p.ViewType, p.NoColor = "conf", ViewJSON, true
				p.Targets, p.Replace = []string{"run.a", "sandbox.b"}, []string{"run.c"}
				p.Refresh, p.Parallelism = false, 3
				p.State = State{StatePath: "s.json", Lock: false, LockTimeout: 30 * time.Second}
				p.Vars = Vars{Vars: []string{"a=1"}, VarFiles: []string{"v.hcl"}}
				p.DetailedExitcode, p.Out, p.Destroy = true, "p.plan", true
			}),
		},
		{name: "negative parallelism", args: []string{"-parallelism=-1"}, diags: []string{"-parallelism must be at least 1, got -1"}},
		{name: "parallelism not a number", args: []string{"-parallelism=many"}, diags: []string{flagErr("plan", `invalid value "many" for flag -parallelism: parse error`)}, usage: true},
		{name: "replace not an address", args: []string{"-replace=foo", "-replace=run.ok", "-replace=agent.a"}, diags: []string{
			"-replace=foo: expected a run or sandbox address such as run.NAME",
			"-replace=agent.a: expected a run or sandbox address such as run.NAME",
		}},
		{name: "refresh only", args: []string{"-refresh-only", "-target=sandbox.b"}, want: with(func(p *Plan) {
			p.RefreshOnly, p.Targets = true, []string{"sandbox.b"}
		})},
		{name: "exclude", args: []string{"-exclude=run.a", "-exclude", `sandbox.b["k"]`}, want: with(func(p *Plan) {
			p.Excludes = []string{"run.a", `sandbox.b["k"]`}
		})},
		{name: "exclude with target, exclude not an address", args: []string{"-exclude=run.a", "-target=run.b", "-exclude=agent.x"}, diags: []string{
			"-target and -exclude cannot be used together: name what to include with -target, or what to leave out with -exclude",
			`-exclude=agent.x: expected a run or sandbox address such as run.NAME or sandbox.NAME["key"]`,
		}},
		{name: "refresh only without refreshing, replacing or as a destroy", args: []string{"-refresh-only", "-refresh=false", "-replace=run.a", "-destroy"}, diags: []string{
			"-refresh-only and -refresh=false cannot be used together: -refresh-only asks the providers about every sandbox",
			"-refresh-only and -replace cannot be used together: a refresh-only plan replaces nothing; drop -replace, or plan without -refresh-only",
			"-destroy and -refresh-only cannot be used together: choose one kind of plan",
		}},
		{name: "apply's flag", args: []string{"-auto-approve"}, diags: []string{flagErr("plan", "flag provided but not defined: -auto-approve")}, usage: true},
		{name: "two PATHs", args: []string{"a", "b"}, diags: []string{"Too many arguments: expected at most one configuration PATH, got a b"}},
	})
}

func TestParseApply(t *testing.T) {
	defaults := Operation{Path: ".", State: stateDefaults, Refresh: true, ViewType: ViewHuman}
	runParseCases(t, ParseApply, []parseCase[Apply]{
		{name: "defaults", want: &Apply{Operation: defaults, Input: true}},
		{name: "a saved plan, approved", args: []string{"p.plan", "-auto-approve", "-json"}, want: &Apply{
			Operation:   Operation{Path: "p.plan", State: stateDefaults, Refresh: true, ViewType: ViewJSON},
			AutoApprove: true,
			Input:       true,
		}},
		{name: "no questions about tool calls", args: []string{"-input=false"}, want: &Apply{Operation: defaults}},
		{name: "refresh only", args: []string{"-refresh-only", "-auto-approve"}, want: &Apply{
			Operation: Operation{Path: ".", State: stateDefaults, Refresh: true, RefreshOnly: true, ViewType: ViewHuman}, AutoApprove: true, Input: true,
		}},
		{name: "plan's flag", args: []string{"-out=p.plan"}, diags: []string{flagErr("apply", "flag provided but not defined: -out")}, usage: true},
		{name: "destroy is its own command", args: []string{"-destroy"}, diags: []string{flagErr("apply", "flag provided but not defined: -destroy")}, usage: true},
		{name: "bad duration", args: []string{"-lock-timeout=soon"}, diags: []string{flagErr("apply", `invalid value "soon" for flag -lock-timeout: parse error`)}, usage: true},
		{name: "two PATHs", args: []string{"a", "b"}, diags: []string{"Too many arguments: expected at most one configuration PATH, got a b"}},
	})
}

func TestParseDestroy(t *testing.T) {
	defaults := Operation{Path: ".", State: stateDefaults, Refresh: true, ViewType: ViewHuman}
	runParseCases(t, ParseDestroy, []parseCase[Apply]{
		{name: "defaults", want: &Apply{Operation: defaults, Destroy: true}},
		{name: "targeted", args: []string{"conf", "-auto-approve", "-target=sandbox.a"}, want: &Apply{
			Operation:   Operation{Path: "conf", State: stateDefaults, Refresh: true, ViewType: ViewHuman, Targets: []string{"sandbox.a"}},
			AutoApprove: true,
			Destroy:     true,
		}},
		{name: "plan's flag", args: []string{"-detailed-exitcode"}, diags: []string{flagErr("destroy", "flag provided but not defined: -detailed-exitcode")}, usage: true},
		{name: "replace not an address", args: []string{"-replace=x"}, diags: []string{"-replace=x: expected a run or sandbox address such as run.NAME"}},
	})
}
