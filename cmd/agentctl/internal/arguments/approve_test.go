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
		{name: "no call", args: []string{"run.a"}, diags: []string{"Approve needs the ids of the calls to approve, or -all; agentctl show run.a lists them"}},
		{name: "ids and -all", args: []string{"run.a", "c", "-all"}, diags: []string{"Approve takes call ids or -all, not both"}},
	})
}

func TestParseReject(t *testing.T) {
	runParseCases(t, ParseReject, []parseCase[Approve]{
		{name: "one call", args: []string{"run.a", "call_1", "-reason=too risky"}, want: &Approve{
			Backend: backendDefaults, Reject: true, Run: "run.a", CallIDs: []string{"call_1"}, Reason: "too risky", ViewType: ViewHuman,
		}},
		{name: "no call", args: []string{"run.a"}, diags: []string{"Reject needs the ids of the calls to reject; agentctl show run.a lists them"}},
		{name: "-all is approve's", args: []string{"run.a", "-all"}, diags: []string{flagErr("reject", "flag provided but not defined: -all")}, usage: true},
	})
}
