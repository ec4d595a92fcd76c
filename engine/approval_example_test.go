package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/providers/builtin"
)

// TestExamplePolicyResistsShellComposition: the policy that README and
// examples/approvals.hcl document lets simple reads run and asks for
// every call whose command the shell would compose, expand or redirect.
// The policy is judged as apply judges it: on exec_command's own
// description of the call.
func TestExamplePolicyResistsShellComposition(t *testing.T) {
	dir, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(filepath.Join(dir, "approvals.hcl"), config.Options{Registry: builtin.Registry()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	policy := cfg.Capabilities["shell.guarded"].Shell.NeedsApproval
	exec := tools.NewExecCommand(nil, tools.ExecOptions{}, nil)
	for args, wantAsk := range map[string]bool{
		`{"cmd":"ls -a"}`:                               false,
		`{"cmd":"cat notes.txt"}`:                       false,
		`{"cmd":"wc -l notes.txt"}`:                     false,
		`{"cmd":"ls -a; echo archived > DANGEROUS"}`:    true,
		`{"cmd":"ls && touch DANGEROUS"}`:               true,
		`{"cmd":"ls | tee DANGEROUS"}`:                  true,
		`{"cmd":"ls > DANGEROUS"}`:                      true,
		`{"cmd":"ls $(touch DANGEROUS)"}`:               true,
		"{\"cmd\":\"ls `touch DANGEROUS`\"}":            true,
		`{"cmd":"ls\ntouch DANGEROUS"}`:                 true,
		`{"cmd":"cat 'x' \"y\""}`:                       true,
		`{"cmd":"ls *"}`:                                true,
		`{"cmd":"LD_PRELOAD=./x.so ls"}`:                true,
		`{"cmd":"ls","shell":"/bin/sh"}`:                true,
		`{"cmd":"ls","shell":"/bin/bash","login":true}`: true,
		`{"cmd":"rm -rf ."}`:                            true,
		`{"cmd":"./ls"}`:                                true,
	} {
		canon, err := tools.CanonicalArguments(args)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		inv, err := exec.Describe(canon)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		ask, err := policy.NeedsApproval(config.Call{Tool: "exec_command", Arguments: canon, Argv: inv.Argv, Simple: inv.Simple, Words: inv.Words})
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if ask != wantAsk {
			t.Errorf("%s: needs approval = %v, want %v", args, ask, wantAsk)
		}
	}
}

// TestPlanCountsManifestEntries: the plan's manifest summary says
// "1 entry", not "1 entries".
func TestPlanCountsManifestEntries(t *testing.T) {
	e, _ := newTestEngine(t, `
provider "local" { isolation = "none" }
manifest "one" {
  file "a.txt" { content = "a" }
}
sandbox "s" {
  provider = provider.local
  manifest = manifest.one
}
`)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(t.Context(), st, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Change("sandbox.s").Attributes["manifest"]; got != "manifest.one (1 entry)" {
		t.Fatalf("manifest attribute %q", got)
	}
}
