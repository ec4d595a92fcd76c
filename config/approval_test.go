package config

import (
	"strings"
	"testing"
)

const approvalBase = `
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
provider "local" {}
sandbox "s" { provider = provider.local }
locals { reads = "^(ls|cat) " }
variable "strict" { default = true }
agent "a" { provider = provider.scripted }
`

func TestApprovalPolicies(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": approvalBase + `
capability "shell" "guarded" {
  needs_approval = !can(regex(local.reads, call.arguments.cmd))
}
capability "filesystem" "fs" {
  needs_approval = var.strict
}
capability "command" "q" {
  description    = "query"
  command        = ["true"]
  needs_approval = call.arguments.n > 1
}
agent "helper" {
  provider = provider.scripted
}
agent "b" {
  provider     = provider.scripted
  sandbox      = sandbox.s
  capabilities = [capability.shell.guarded, capability.filesystem.fs, capability.command.q]
  tool "helper" {
    agent          = agent.helper
    needs_approval = call.tool == "helper"
  }
}
`}, Options{})
	shell := c.Capabilities["shell.guarded"].Shell.NeedsApproval
	if _, constant := shell.Constant(); constant {
		t.Fatal("an expression over call is constant")
	}
	for args, want := range map[string]bool{`{"cmd":"ls -a"}`: false, `{"cmd":"cat x"}`: false, `{"cmd":"rm -rf /"}`: true, `{"cmd":"echo > DANGEROUS"}`: true} {
		got, err := shell.NeedsApproval(Call{Tool: "exec_command", Arguments: args})
		if err != nil || got != want {
			t.Errorf("%s: got %v, %v; want %v", args, got, err, want)
		}
	}
	if v, constant := c.Capabilities["filesystem.fs"].Filesystem.NeedsApproval.Constant(); !constant || !v {
		t.Errorf("var.strict: constant %v value %v, want constant true", constant, v)
	}
	cmd := c.Capabilities["command.q"].Command.NeedsApproval
	if got, err := cmd.NeedsApproval(Call{Tool: "q", Arguments: `{"n":2}`}); err != nil || !got {
		t.Errorf("n=2: %v %v", got, err)
	}
	// A missing argument, and a value that is not a bool: errors naming
	// the attribute's place, never a silent pass.
	if _, err := cmd.NeedsApproval(Call{Tool: "q", Arguments: `{}`}); err == nil || !strings.Contains(err.Error(), "needs_approval at ") || !strings.Contains(err.Error(), "main.hcl:") {
		t.Errorf("missing argument: err = %v", err)
	}
	if got, err := c.Agents["b"].Tools[0].NeedsApproval.NeedsApproval(Call{Tool: "helper", Arguments: `{"input":"x"}`}); err != nil || !got {
		t.Errorf("agent tool: %v %v", got, err)
	}
	if v, _ := c.Capabilities["shell.guarded"].Shell.NeedsApproval.MarshalJSON(); !strings.Contains(string(v), "call.arguments.cmd") {
		t.Errorf("JSON = %s, want the expression's source", v)
	}
}

func TestApprovalPolicyNotBool(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": approvalBase + `
capability "shell" "odd" {
  needs_approval = call.arguments
}
`}, Options{})
	_, err := c.Capabilities["shell.odd"].Shell.NeedsApproval.NeedsApproval(Call{Tool: "exec_command", Arguments: `{"cmd":"ls"}`})
	if err == nil || !strings.Contains(err.Error(), "must be true or false") || !strings.Contains(err.Error(), "main.hcl:14") {
		t.Errorf("err = %v", err)
	}
}

func TestApprovalPolicyDiagnostics(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`call.argument.cmd`, `The call object has tool (the tool's name), arguments`},
		{`run.x.output == "a"`, `needs_approval may refer only to call.tool, call.arguments, call.argv, call.simple, call.words, var.* and local.*`},
		{`var.nope`, `There is no input variable named "nope"`},
		{`"maybe"`, `needs_approval must be true or false`},
	} {
		_, diags := load(t, map[string]string{"main.hcl": approvalBase + `
capability "shell" "x" {
  needs_approval = ` + tc.expr + `
}
`}, Options{})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
			t.Errorf("%s: diags = %s, want %q", tc.expr, diags.Error(), tc.want)
			continue
		}
		if d := diags[0]; d.Subject == nil || d.Subject.Start.Line != 14 {
			t.Errorf("%s: diagnostic not located at line 14: %+v", tc.expr, d.Subject)
		}
	}
}

// TestApprovalGapWarning: a shell or command policy that decides per
// call, beside a filesystem capability that writes without approval, is
// warned about at the agent's reference; a gated filesystem is not.
func TestApprovalGapWarning(t *testing.T) {
	const caps = `
capability "shell" "guarded" {
  needs_approval = !(call.simple && contains(["ls"], call.words[0]))
}
capability "command" "q" {
  description    = "query"
  command        = ["./query.sh"]
  needs_approval = call.arguments.n > 1
}
capability "filesystem" "open" {}
capability "filesystem" "gated" {
  needs_approval = true
}
`
	for _, tc := range []struct {
		fs   string
		n    int
		want []string
	}{
		{"open", 2, []string{"capability.shell.guarded decides per call", "capability.command.q decides per call", "the command ./query.sh"}},
		{"gated", 0, nil},
	} {
		_, diags := load(t, map[string]string{"main.hcl": approvalBase + caps + `
agent "b" {
  provider     = provider.scripted
  sandbox      = sandbox.s
  capabilities = [capability.shell.guarded, capability.command.q, capability.filesystem.` + tc.fs + `]
}
`}, Options{})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		var got []string
		for _, d := range diags {
			if d.Summary == "Approval policy can be bypassed through files the agent writes" && d.Subject != nil && d.Subject.Start.Line > 0 {
				got = append(got, d.Detail)
			}
		}
		if len(got) != tc.n {
			t.Fatalf("%s: warnings %q, want %d", tc.fs, got, tc.n)
		}
		all := strings.Join(got, "\n")
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: warnings %q lack %q", tc.fs, got, w)
			}
		}
	}
}
