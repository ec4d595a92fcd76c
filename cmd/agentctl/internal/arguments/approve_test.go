package arguments

import "testing"

func TestParseApprove(t *testing.T) {
	runParseCases(t, ParseApprove, []parseCase[Approve]{
		{name: "two calls with a reason", args: []string{"run.a", "call_1", "-reason", "looks fine", "call_2"}, want: &Approve{
			Backend: backendDefaults, Run: "run.a", CallIDs: []string{"call_1", "call_2"}, Reason: "looks fine", ViewType: ViewHuman,
		}},
		{name: "every call as JSON", args: []string{"-all", "-json", "run.a"}, want: &Approve{
			Backend: backendDefaults, Run: "run.a", CallIDs: []string{}, All: true, ViewType: ViewJSON,
		}},
		{name: "no run", args: []string{"call_1"}, diags: []string{"Approve needs a run address first, like agentctl approve run.NAME CALL_ID"}},
		{name: "no call", args: []string{"run.a"}, diags: []string{"Approve needs the ids of the calls to approve, or -all, or -tool NAME for every later call of a tool; agentctl show run.a lists them"}},
		{name: "ids and -all", args: []string{"run.a", "c", "-all"}, diags: []string{"Approve takes call ids or -all, not both"}},
		{name: "tools", args: []string{"run.a", "-tool", "exec_command", "-tool=apply_patch", "-reason", "fine"}, want: &Approve{
			Backend: backendDefaults, Run: "run.a", CallIDs: []string{}, Tools: []string{"exec_command", "apply_patch"}, Reason: "fine", ViewType: ViewHuman,
		}},
		{name: "a call and a tool", args: []string{"run.a", "call_1", "-tool", "exec_command"}, want: &Approve{
			Backend: backendDefaults, Run: "run.a", CallIDs: []string{"call_1"}, Tools: []string{"exec_command"}, ViewType: ViewHuman,
		}},
		{name: "revoke", args: []string{"run.a", "-tool", "exec_command", "-revoke"}, want: &Approve{
			Backend: backendDefaults, Run: "run.a", CallIDs: []string{}, Tools: []string{"exec_command"}, Revoke: true, ViewType: ViewHuman,
		}},
		{name: "revoke without a tool", args: []string{"run.a", "-revoke"}, diags: []string{"-revoke withdraws the standing decision of a tool: name it with -tool NAME"}},
		{name: "revoke a call", args: []string{"run.a", "call_1", "-tool", "exec_command", "-revoke"}, diags: []string{"-revoke takes only -tool NAME, not call ids or -all: a decision on a call cannot be withdrawn"}},
		{name: "empty tool", args: []string{"run.a", "-tool", " "}, diags: []string{"-tool needs a tool name, such as -tool exec_command"}},
	})
}

func TestParseReject(t *testing.T) {
	runParseCases(t, ParseReject, []parseCase[Approve]{
		{name: "one call", args: []string{"run.a", "call_1", "-reason=too risky"}, want: &Approve{
			Backend: backendDefaults, Reject: true, Run: "run.a", CallIDs: []string{"call_1"}, Reason: "too risky", ViewType: ViewHuman,
		}},
		{name: "no call", args: []string{"run.a"}, diags: []string{"Reject needs the ids of the calls to reject, or -tool NAME for every later call of a tool; agentctl show run.a lists them"}},
		{name: "never a tool", args: []string{"run.a", "-tool", "exec_command", "-reason", "no shell"}, want: &Approve{
			Backend: backendDefaults, Reject: true, Run: "run.a", CallIDs: []string{}, Tools: []string{"exec_command"}, Reason: "no shell", ViewType: ViewHuman,
		}},
		{name: "-all is approve's", args: []string{"run.a", "-all"}, diags: []string{flagErr("reject", "flag provided but not defined: -all")}, usage: true},
	})
}
