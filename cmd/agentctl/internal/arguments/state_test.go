package arguments

import (
	"testing"
	"time"
)

// backendDefaults are the -config, -state and -lock defaults of the
// commands that lock the state (exec, tool call, state rm).
var backendDefaults = Backend{Config: ".", State: stateDefaults}

// readDefaults are the -config and -state defaults of the commands that
// only read the state: they have no -lock or -lock-timeout to ignore.
var readDefaults = Backend{Config: "."}

func TestParseShow(t *testing.T) {
	runParseCases(t, ParseShow, []parseCase[Show]{
		{name: "the whole state", want: &Show{Backend: readDefaults, ViewType: ViewHuman}},
		{name: "a run as JSON", args: []string{"run.a", "-json", "-config=conf"}, want: &Show{
			Backend: Backend{Config: "conf", State: State{}}, Target: "run.a", ViewType: ViewJSON,
		}},
		{name: "a plan file, variables", args: []string{"-var=a=1", "-no-color", "p.plan"}, want: &Show{
			Backend: Backend{Config: ".", State: State{}, Vars: Vars{Vars: []string{"a=1"}}}, Target: "p.plan", ViewType: ViewHuman, NoColor: true,
		}},
		{name: "two arguments", args: []string{"run.a", "run.b"}, diags: []string{"Show takes at most one argument: an address such as run.NAME, or a saved plan file"}},
		{name: "-lock, which show would ignore", args: []string{"-lock=false"}, diags: []string{flagErr("show", "flag provided but not defined: -lock")}, usage: true},
		{name: "output's flag", args: []string{"-raw"}, diags: []string{flagErr("show", "flag provided but not defined: -raw")}, usage: true},
	})
}

func TestParseOutput(t *testing.T) {
	runParseCases(t, ParseOutput, []parseCase[Output]{
		{name: "every output", want: &Output{Backend: readDefaults, ViewType: ViewHuman}},
		{name: "one as JSON", args: []string{"answer", "-json"}, want: &Output{Backend: readDefaults, Name: "answer", ViewType: ViewJSON}},
		{name: "one raw", args: []string{"-raw", "-config", "c.hcl", "answer"}, want: &Output{
			Backend: Backend{Config: "c.hcl", State: State{}}, Name: "answer", ViewType: ViewRaw,
		}},
		{name: "-json and -raw", args: []string{"-json", "-raw", "answer"}, diags: []string{
			"-json and -raw cannot be used together: use -json for JSON, or -raw for a string output's exact value",
		}},
		{name: "two names", args: []string{"a", "b"}, diags: []string{"Output takes at most one NAME"}},
		{name: "unknown flag", args: []string{"-all"}, diags: []string{flagErr("output", "flag provided but not defined: -all")}, usage: true},
	})
}

func TestParseConsole(t *testing.T) {
	runParseCases(t, ParseConsole, []parseCase[Console]{
		{name: "defaults", want: &Console{Backend: readDefaults}},
		{name: "another configuration", args: []string{"-config", "c.hcl", "-var", "name=x", "-no-color"}, want: &Console{
			Backend: Backend{Config: "c.hcl", Vars: Vars{Vars: []string{"name=x"}}}, NoColor: true,
		}},
		{name: "a path", args: []string{"proj"}, diags: []string{"Console takes no arguments: it reads expressions from standard input; use -config to name the configuration"}},
		{name: "unknown flag", args: []string{"-json"}, diags: []string{flagErr("console", "flag provided but not defined: -json")}, usage: true},
	})
}

func TestParseStateList(t *testing.T) {
	runParseCases(t, ParseStateList, []parseCase[StateList]{
		{name: "human", want: &StateList{Backend: readDefaults, ViewType: ViewHuman}},
		{name: "json, another state file", args: []string{"-json", "-state=other.json"}, want: &StateList{
			Backend: Backend{Config: ".", State: State{StatePath: "other.json"}}, ViewType: ViewJSON,
		}},
		{name: "an address", args: []string{"run.a"}, diags: []string{"State list takes no arguments; agentctl state show ADDR shows one object"}},
		{name: "unknown flag", args: []string{"-raw"}, diags: []string{flagErr("state list", "flag provided but not defined: -raw")}, usage: true},
	})
}

func TestParseStateShow(t *testing.T) {
	runParseCases(t, ParseStateShow, []parseCase[StateShow]{
		{name: "one address", args: []string{"sandbox.a"}, want: &StateShow{Backend: readDefaults, Address: "sandbox.a"}},
		{name: "-json is accepted", args: []string{"-json", "run.a"}, want: &StateShow{Backend: readDefaults, Address: "run.a"}},
		{name: "no address", diags: []string{"State show needs exactly one address, such as run.NAME or sandbox.NAME"}},
		{name: "two addresses", args: []string{"run.a", "run.b"}, diags: []string{"State show needs exactly one address, such as run.NAME or sandbox.NAME"}},
	})
}

func TestParseStateRm(t *testing.T) {
	runParseCases(t, ParseStateRm, []parseCase[StateRm]{
		{name: "addresses", args: []string{"run.a", "-lock-timeout=1s", "sandbox.b"}, want: &StateRm{
			Backend: Backend{Config: ".", State: State{Lock: true, LockTimeout: time.Second}}, Addresses: []string{"run.a", "sandbox.b"},
		}},
		{name: "no address", args: []string{"-config=c"}, diags: []string{"State rm needs at least one address"}},
		{name: "unknown flag", args: []string{"-force", "run.a"}, diags: []string{flagErr("state rm", "flag provided but not defined: -force")}, usage: true},
	})
}

func TestParseForceUnlock(t *testing.T) {
	runParseCases(t, ParseForceUnlock, []parseCase[ForceUnlock]{
		{name: "a lock ID", args: []string{"1234-abcd"}, want: &ForceUnlock{Backend: readDefaults, LockID: "1234-abcd"}},
		{name: "no lock ID", diags: []string{"Force-unlock needs the lock ID printed in the lock error"}},
		{name: "two lock IDs", args: []string{"a", "b"}, diags: []string{"Force-unlock needs the lock ID printed in the lock error"}},
		{name: "-lock-timeout, which it would ignore", args: []string{"-lock-timeout=1s", "a"}, diags: []string{flagErr("force-unlock", "flag provided but not defined: -lock-timeout")}, usage: true},
		{name: "unknown flag", args: []string{"-force", "a"}, diags: []string{flagErr("force-unlock", "flag provided but not defined: -force")}, usage: true},
	})
}

func TestParseExec(t *testing.T) {
	runParseCases(t, ParseExec, []parseCase[Exec]{
		{name: "command after --", args: []string{"sandbox.a", "--", "ls", "-la"}, want: &Exec{
			Backend: backendDefaults, Address: "sandbox.a", Argv: []string{"ls", "-la"},
		}},
		{name: "flags before, -- kept verbatim after", args: []string{"-config=c", "sandbox.a", "-lock=false", "--", "sh", "-c", "echo --"}, want: &Exec{
			Backend: Backend{Config: "c", State: State{}}, Address: "sandbox.a", Argv: []string{"sh", "-c", "echo --"},
		}},
		{name: "no command", args: []string{"sandbox.a"}, diags: []string{"Exec needs a sandbox address and a command: agentctl exec sandbox.NAME -- CMD [ARG...]"}},
		{name: "nothing", diags: []string{"Exec needs a sandbox address and a command: agentctl exec sandbox.NAME -- CMD [ARG...]"}},
		{name: "the command's flag before --", args: []string{"sandbox.a", "ls", "-la"}, diags: []string{flagErr("exec", "flag provided but not defined: -la")}, usage: true},
	})
}

func TestParseToolCall(t *testing.T) {
	runParseCases(t, ParseToolCall, []parseCase[ToolCall]{
		{name: "host directory", args: []string{"apply_patch", "-dir", "work"}, want: &ToolCall{Backend: backendDefaults, Name: "apply_patch", Dir: "work"}},
		{name: "sandbox with arguments", args: []string{"-sandbox=sandbox.a", "-args", `{"cmd":"ls"}`, "exec_command"}, want: &ToolCall{
			Backend: backendDefaults, Name: "exec_command", Sandbox: "sandbox.a", Input: `{"cmd":"ls"}`,
		}},
		{name: "both -dir and -sandbox", args: []string{"-dir=.", "-sandbox=sandbox.a", "x"}, diags: []string{
			"Tool call needs exactly one of -dir DIR (a host directory, no isolation) or -sandbox ADDR (a managed sandbox)",
		}},
		{name: "neither -dir nor -sandbox", args: []string{"x"}, diags: []string{
			"Tool call needs exactly one of -dir DIR (a host directory, no isolation) or -sandbox ADDR (a managed sandbox)",
		}},
		{name: "-dir with state flags", args: []string{"-dir=.", "-config=c", "-lock=false", "-state=s.json", "x"}, diags: []string{
			"Tool call -dir uses no state, so -lock, -state would be ignored: remove it, or use -sandbox ADDR",
		}},
		{name: "no name", args: []string{"-dir=."}, diags: []string{"Tool call needs exactly one tool NAME, such as apply_patch"}},
		{name: "two names", args: []string{"-dir=.", "a", "b"}, diags: []string{"Tool call needs exactly one tool NAME, such as apply_patch"}},
		{name: "unknown flag", args: []string{"-json", "x"}, diags: []string{flagErr("tool call", "flag provided but not defined: -json")}, usage: true},
	})
}
