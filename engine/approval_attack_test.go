package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/state"
)

// The attacks in this file are a hostile model's: it chooses its own call
// ids and sends raw argument JSON through the openai provider to the
// in-process fake of the Responses API.

// hostileEngine is an engine whose run.r has agent.a (openai, at srv)
// with a shell capability guarded by policy, in a local sandbox.
func hostileEngine(t *testing.T, srv *fakeopenai.Server, policy string) (*Engine, string) {
	t.Helper()
	e, dir := newTestEngine(t, fmt.Sprintf(`
provider "openai" {
  base_url    = %q
  max_retries = 0
}
provider "local" { isolation = "none" }
sandbox "s" { provider = provider.local }
locals { reads = ["ls", "cat"] }
capability "shell" "guarded" {
  needs_approval = %s
}
agent "a" {
  model        = "gpt-test"
  sandbox      = sandbox.s
  capabilities = [capability.shell.guarded]
}
run "r" {
  agent = agent.a
  input = "tidy up"
}
`, srv.URL, policy))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	return e, dir
}

// found reports whether a file named name exists anywhere under dir.
func found(t *testing.T, dir, name string) bool {
	t.Helper()
	hit := false
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			hit = true
		}
		return nil
	})
	return hit
}

// sentOutputs are the function_call_output items the model was sent,
// by call id.
func sentOutputs(srv *fakeopenai.Server) map[string]string {
	out := map[string]string{}
	for _, r := range srv.Requests() {
		for _, it := range r.Input() {
			if it["type"] == "function_call_output" {
				out[fmt.Sprint(it["call_id"])] = fmt.Sprint(it["output"])
			}
		}
	}
	return out
}

// TestHostileArgumentsCannotDivergeFromThePolicy: arguments that a
// case-sensitive reader (the policy) and a case-insensitive one (Go's
// JSON decoder) would read differently never run.
func TestHostileArgumentsCannotDivergeFromThePolicy(t *testing.T) {
	for _, tc := range []struct{ name, args string }{
		{"case-variant key", `{"cmd":"ls","CMD":"touch PWNED"}`},
		{"case-variant key first", `{"CMD":"touch PWNED","cmd":"ls"}`},
		{"duplicate key", `{"cmd":"ls","cmd":"touch PWNED"}`},
		{"lone case-variant key", `{"Cmd":"touch PWNED"}`},
		{"kelvin sign folds to k", `{"cmd":"ls","wor\u212adir":"."}`},
		{"trailing object", `{"cmd":"ls"}{"cmd":"touch PWNED"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t)
			srv.Enqueue(
				fakeopenai.Calls(fakeopenai.FunctionCall("c1", "exec_command", tc.args)),
				fakeopenai.Text("done"),
			)
			e, dir := hostileEngine(t, srv, `call.arguments.cmd != "ls"`)
			st := planApply(t, e, PlanOptions{})
			if found(t, dir, "PWNED") {
				t.Fatal("PWNED was written: the policy judged one command and another ran")
			}
			if r := st.Runs["run.r"]; r.Status != RunCompleted {
				t.Fatalf("run status %s, want completed (the call is a tool error the model reads)", r.Status)
			}
			if out := sentOutputs(srv)["c1"]; !strings.HasPrefix(out, "error: ") {
				t.Errorf("the model read %q, want a tool error", out)
			}
		})
	}
}

// TestHostileReusedCallIDIsNotApproved: a decision on call r1 does not
// approve a later call that reuses the id r1; the run fails the turn as
// a model error instead.
func TestHostileReusedCallIDIsNotApproved(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(fakeopenai.Calls(fakeopenai.FunctionCall("r1", "exec_command", `{"cmd":"echo approved > A"}`)))
	e, dir := hostileEngine(t, srv, `call.arguments.cmd != "ls"`)
	st := planApply(t, e, PlanOptions{})
	r := st.Runs["run.r"]
	if r.Status != RunAwaiting || len(r.Pending()) != 1 || r.Pending()[0].CallID != "r1" || r.Pending()[0].Digest == "" {
		t.Fatalf("run %s, pending %+v: want r1 awaiting with its digest", r.Status, r.Pending())
	}
	if _, err := r.Decide([]string{"r1"}, false, state.ApprovalApproved, "alice", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.State.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	// The next turn reuses r1 for another command.
	srv.Enqueue(fakeopenai.Calls(fakeopenai.FunctionCall("r1", "exec_command", `{"cmd":"touch PWNED"}`)))
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(t.Context(), st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Apply(t.Context(), st, p)
	if !found(t, dir, "A") {
		t.Fatal("the approved call did not run")
	}
	if found(t, dir, "PWNED") {
		t.Fatal("PWNED was written: a reused call id inherited r1's approval")
	}
	if err == nil || !strings.Contains(err.Error(), `reused call id "r1"`) {
		t.Fatalf("apply: %v, want the reused id reported", err)
	}
	if n := len(st.Runs["run.r"].Approvals); n != 1 {
		t.Errorf("%d approval entries, want 1", n)
	}
}

// TestDecisionBindsToTheCallsContent: a recorded decision on call r1 does
// not apply to a call r1 with other arguments (here the model's first
// response already differs, as when a decision was recorded for another
// attempt): it is a new pending call.
func TestDecisionBindsToTheCallsContent(t *testing.T) {
	approved := agentloop.CallDigest("exec_command", `{"cmd":"echo approved > A"}`)
	d := agentloop.Decision{Approved: true, Tool: "exec_command", Digest: approved}
	key := agentloop.DecisionKey{CallID: "r1"}
	srv := fakeopenai.New(t)
	srv.Enqueue(fakeopenai.Calls(fakeopenai.FunctionCall("r1", "exec_command", `{"cmd": "touch PWNED"}`)))
	e, dir := hostileEngine(t, srv, `call.arguments.cmd != "ls"`)
	st := planApply(t, e, PlanOptions{})
	r := st.Runs["run.r"]
	// Record the approval of the other content under r1, then resume.
	for _, ap := range r.Approvals {
		ap.Decision, ap.Digest, ap.DecidedBy = state.ApprovalApproved, d.Digest, "mallory"
	}
	if err := e.State.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if got := decisions(r, true)[key]; got.Digest != approved {
		t.Fatalf("decisions = %+v", got)
	}
	st = planApply(t, e, PlanOptions{})
	if found(t, dir, "PWNED") {
		t.Fatal("PWNED was written under a decision made on other arguments")
	}
	if r := st.Runs["run.r"]; r.Status != RunAwaiting {
		t.Fatalf("run %s, want awaiting approval of the new content", r.Status)
	}
}

// TestPolicySeesTheWholeCall: with cmd = "ls" allowed, a login shell that
// sources a .profile is not the same call; call.argv shows it and the
// example policy (simple commands from an allowlist) asks.
func TestPolicySeesTheWholeCall(t *testing.T) {
	for _, tc := range []struct {
		name, policy, args string
		asks               bool
	}{
		{"argv of a login shell", `join(" ", call.argv) != "/bin/sh -c ls"`, `{"cmd":"ls","shell":"/bin/sh","login":true}`, true},
		{"argv of the default shell", `join(" ", call.argv) != "/bin/sh -c ls"`, `{"cmd":"ls"}`, false},
		{"login shell is not simple", `!(call.simple && contains(local.reads, call.words[0]))`, `{"cmd":"ls","shell":"/bin/sh","login":true}`, true},
		{"shell composition is not simple", `!(call.simple && contains(local.reads, call.words[0]))`, `{"cmd":"ls -a; touch PWNED"}`, true},
		{"substitution is not simple", `!(call.simple && contains(local.reads, call.words[0]))`, `{"cmd":"ls $(touch PWNED)"}`, true},
		{"a simple read runs", `!(call.simple && contains(local.reads, call.words[0]))`, `{"cmd":"ls -a"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t)
			srv.Enqueue(fakeopenai.Calls(fakeopenai.FunctionCall("c1", "exec_command", tc.args)), fakeopenai.Text("done"))
			e, dir := hostileEngine(t, srv, tc.policy)
			st := planApply(t, e, PlanOptions{})
			if got := st.Runs["run.r"].Status == RunAwaiting; got != tc.asks {
				t.Fatalf("asks = %v (status %s), want %v", got, st.Runs["run.r"].Status, tc.asks)
			}
			if found(t, dir, "PWNED") {
				t.Fatal("PWNED was written without approval")
			}
		})
	}
}
