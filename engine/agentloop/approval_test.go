package agentloop

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentctl/agentctl/providers/scripted"
)

// approvalAgent has three tools: read (its policy says no), write (its
// policy asks when the path is outside tmp/) and broken (its policy
// fails); writes counts the write tool's executions.
func approvalAgent(writes *atomic.Int32) *Agent {
	m := scripted.New(map[string][]scripted.Reply{
		"a": {
			{Calls: []scripted.Call{call("read", `{"path":"x"}`), call("write", `{"path":"DANGEROUS"}`), call("broken", `{}`), call("write", `{"path":"tmp/ok"}`)}},
			{Text: "done"},
		},
	})
	ok := func(context.Context, string) (string, error) { return "ok", nil }
	a := agentWith("a", m,
		funcTool{name: "read", fn: ok},
		funcTool{name: "write", fn: func(context.Context, string) (string, error) { writes.Add(1); return "written", nil }},
		funcTool{name: "broken", fn: ok},
	)
	a.Approvals = map[string]ApprovalPolicy{
		"read": func(PolicyCall) (bool, error) { return false, nil },
		"write": func(c PolicyCall) (bool, error) {
			return !strings.Contains(c.Arguments, `"tmp/`), nil
		},
		"broken": func(PolicyCall) (bool, error) {
			return false, errors.New("needs_approval at main.hcl:3: Unsupported attribute")
		},
	}
	return a
}

func outputsOf(steps []Step) map[string]string {
	out := map[string]string{}
	for _, s := range steps {
		if s.Kind == StepTool {
			out[s.Result.CallID] = s.Result.Output
		}
	}
	return out
}

func TestApprovalDefersThenResumes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision Decision
		want     string
		writes   int32
	}{
		{"approved", Decision{Approved: true}, "written", 2},
		{"rejected", Decision{Reason: "not that file"}, "rejected by the reviewer: not that file", 1},
		{"rejected without a reason", Decision{}, "rejected by the reviewer", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var writes atomic.Int32
			a := approvalAgent(&writes)
			rec := &recorder{}
			var policyErrors []string
			events := func(e Event) {
				if e.Type == EventPolicyError {
					policyErrors = append(policyErrors, e.Text)
				}
			}
			r := &Runner{Agents: map[string]*Agent{"a": a}, Checkpoint: rec.checkpoint, Events: events}
			_, err := r.Run(context.Background(), "a", "go", nil)
			calls, ok := IsAwaitingApproval(err)
			if !ok {
				t.Fatalf("err = %v, want awaiting approval", err)
			}
			if len(calls) != 1 || calls[0].Tool != "write" || calls[0].CallID != "call_a_0_1" || calls[0].Arguments != `{"path":"DANGEROUS"}` || calls[0].Agent != "a" {
				t.Fatalf("pending = %+v", calls)
			}
			if n := writes.Load(); n != 1 {
				t.Fatalf("write ran %d times before approval, want 1 (the call under tmp/ only)", n)
			}
			outs := outputsOf(rec.steps)
			if outs["call_a_0_0"] != "ok" || outs["call_a_0_3"] != "written" {
				t.Errorf("the calls that need no approval did not run: %v", outs)
			}
			if got := outs["call_a_0_2"]; got != PolicyRefusal {
				t.Errorf("a failing policy gives the model %q, want %q (its located error is the operator's)", got, PolicyRefusal)
			}
			if len(policyErrors) != 1 || !strings.HasPrefix(policyErrors[0], "needs_approval at main.hcl:3:") {
				t.Errorf("the operator was told %q, want the policy's located error", policyErrors)
			}
			if _, done := outs["call_a_0_1"]; done {
				t.Fatal("the pending call has an output")
			}

			// Still undecided: the run stays awaiting, nothing runs again.
			again := &recorder{steps: append([]Step(nil), rec.steps...)}
			r2 := &Runner{Agents: map[string]*Agent{"a": approvalAgent(&writes)}, Checkpoint: again.checkpoint}
			if _, err := r2.Run(context.Background(), "a", "go", rec.steps); !isAwaitingErr(err) {
				t.Fatalf("undecided resume: err = %v, want awaiting approval", err)
			}
			if n := writes.Load(); n != 1 {
				t.Fatalf("write ran %d times while undecided", n)
			}

			r3 := &Runner{Agents: map[string]*Agent{"a": approvalAgent(&writes)}, Checkpoint: again.checkpoint,
				Decisions: map[DecisionKey]Decision{{CallID: "call_a_0_1"}: withTool(tc.decision, "write")}}
			res, err := r3.Run(context.Background(), "a", "go", rec.steps)
			if err != nil {
				t.Fatal(err)
			}
			if outputString(t, res) != "done" {
				t.Errorf("output = %s", res.Output)
			}
			if got := outputsOf(again.steps)["call_a_0_1"]; got != tc.want {
				t.Errorf("decided call's output = %q, want %q", got, tc.want)
			}
			if n := writes.Load(); n != tc.writes {
				t.Errorf("write ran %d times, want %d", n, tc.writes)
			}
		})
	}
}

func isAwaitingErr(err error) bool {
	_, ok := IsAwaitingApproval(err)
	return ok
}

// A call inside an agent-tool run that needs approval pauses the whole
// run; on resume the nested run continues where it stopped.
func TestApprovalInsideAgentTool(t *testing.T) {
	var writes atomic.Int32
	m := scripted.New(map[string][]scripted.Reply{
		"boss": {
			{Calls: []scripted.Call{call("worker", `{"input":"write it"}`)}},
			{Text: "boss done"},
		},
		"worker": {
			{Calls: []scripted.Call{call("write", `{"path":"DANGEROUS"}`)}},
			{Text: "worker done"},
		},
	})
	boss := agentWith("boss", m)
	boss.AgentTools = []AgentTool{{Name: "worker", Agent: "worker", Description: "works"}}
	worker := agentWith("worker", m, funcTool{name: "write", fn: func(context.Context, string) (string, error) { writes.Add(1); return "written", nil }})
	worker.Approvals = map[string]ApprovalPolicy{"write": func(PolicyCall) (bool, error) { return true, nil }}
	agents := map[string]*Agent{"boss": boss, "worker": worker}
	rec := &recorder{}
	_, err := (&Runner{Agents: agents, Checkpoint: rec.checkpoint}).Run(context.Background(), "boss", "go", nil)
	calls, ok := IsAwaitingApproval(err)
	if !ok || len(calls) != 1 || calls[0].Agent != "worker" || calls[0].Path != "call_boss_0_0" || calls[0].CallID != "call_worker_0_0" {
		t.Fatalf("err = %v, calls = %+v", err, calls)
	}
	if writes.Load() != 0 {
		t.Fatal("the nested call ran before approval")
	}
	res, err := (&Runner{Agents: agents, Checkpoint: rec.checkpoint, Decisions: map[DecisionKey]Decision{{Path: "call_boss_0_0", CallID: "call_worker_0_0"}: {Approved: true, Tool: "write"}}}).Run(context.Background(), "boss", "go", rec.steps)
	if err != nil {
		t.Fatal(err)
	}
	if outputString(t, res) != "boss done" || writes.Load() != 1 {
		t.Errorf("output %s, writes %d", res.Output, writes.Load())
	}
}

// Ask decides inline: an approved call runs, a rejected one tells the
// model why, a deferred one ends the run awaiting.
func TestApprovalAsk(t *testing.T) {
	for _, tc := range []struct {
		name    string
		d       Decision
		ok      bool
		writes  int32
		waiting bool
	}{
		{"yes", Decision{Approved: true}, true, 2, false},
		{"no", Decision{Reason: "nope"}, true, 1, false},
		{"defer", Decision{}, false, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var writes atomic.Int32
			var asked []PendingCall
			r := &Runner{Agents: map[string]*Agent{"a": approvalAgent(&writes)}, Ask: func(_ context.Context, c PendingCall) (Decision, bool) {
				asked = append(asked, c)
				return tc.d, tc.ok
			}}
			_, err := r.Run(context.Background(), "a", "go", nil)
			if isAwaitingErr(err) != tc.waiting {
				t.Fatalf("err = %v", err)
			}
			if !tc.waiting && err != nil {
				t.Fatal(err)
			}
			if len(asked) != 1 || asked[0].CallID != "call_a_0_1" {
				t.Errorf("asked about %+v, want the one call that needs approval", asked)
			}
			if writes.Load() != tc.writes {
				t.Errorf("write ran %d times, want %d", writes.Load(), tc.writes)
			}
		})
	}
}

// TestApprovalSpans: each call that needs approval gets an "approval
// TOOL" span under its turn, saying the decision and where it came from.
func TestApprovalSpans(t *testing.T) {
	for _, tc := range []struct {
		name             string
		d                Decision
		ok               bool
		decision, source string
	}{
		{"approved", Decision{Approved: true}, true, "approved", "reviewer"},
		{"rejected", Decision{Reason: "nope"}, true, "rejected", "reviewer"},
		{"pending", Decision{}, false, "pending", "reviewer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			var writes atomic.Int32
			r := &Runner{Agents: map[string]*Agent{"a": approvalAgent(&writes)}, Tracer: tp.Tracer("test"),
				Ask: func(context.Context, PendingCall) (Decision, bool) { return tc.d, tc.ok }}
			r.Run(context.Background(), "a", "go", nil)
			var found []sdktrace.ReadOnlySpan
			byID := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range rec.Ended() {
				byID[s.SpanContext().SpanID().String()] = s
				if strings.HasPrefix(s.Name(), "approval ") {
					found = append(found, s)
				}
			}
			if len(found) != 1 || found[0].Name() != "approval write" {
				t.Fatalf("approval spans %v, want one for the write that needs approval", found)
			}
			attrs := map[string]string{}
			for _, kv := range found[0].Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			if attrs["agentctl.approval.decision"] != tc.decision || attrs["agentctl.approval.source"] != tc.source ||
				attrs["gen_ai.tool.name"] != "write" || attrs["gen_ai.tool.call.id"] != "call_a_0_1" {
				t.Errorf("approval span attributes %v", attrs)
			}
			parent, ok := byID[found[0].Parent().SpanID().String()]
			if !ok || !strings.HasPrefix(parent.Name(), "invoke_agent") && !strings.HasPrefix(parent.Name(), "execute_tool") {
				t.Errorf("the approval span's parent is %v, want the turn's span", parent)
			}
		})
	}
}

func withTool(d Decision, tool string) Decision {
	d.Tool = tool
	return d
}
