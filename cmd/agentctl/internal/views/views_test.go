package views

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/state"
	"github.com/hashicorp/hcl/v2"
)

func newTestView() (*View, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &View{Stdout: &out, Stderr: &errOut}, &out, &errOut
}

func TestVersionViews(t *testing.T) {
	info := VersionInfo{Version: "1.2.3", Platform: "linux_amd64"}
	for _, tc := range []struct {
		viewType arguments.ViewType
		want     string
	}{
		{arguments.ViewHuman, "agentctl v1.2.3\non linux_amd64\n"},
		{arguments.ViewJSON, "{\n  \"agentctl_version\": \"1.2.3\",\n  \"platform\": \"linux_amd64\"\n}\n"},
	} {
		v, out, _ := newTestView()
		NewVersion(tc.viewType, v).Version(info)
		if out.String() != tc.want {
			t.Errorf("%v: got %q, want %q", tc.viewType, out, tc.want)
		}
	}
}

func TestValidateViews(t *testing.T) {
	v, out, _ := newTestView()
	NewValidate(arguments.ViewHuman, v).Results(nil, nil)
	if out.String() != "Success! The configuration is valid.\n" {
		t.Errorf("human: got %q", out)
	}
	v, out, errOut := newTestView()
	diags := hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Broken"}}
	NewValidate(arguments.ViewJSON, v).Results(diags, nil)
	var doc struct {
		Valid      bool `json:"valid"`
		ErrorCount int  `json:"error_count"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("JSON: %v in %q", err, out)
	}
	if doc.Valid || doc.ErrorCount != 1 || errOut.Len() != 0 {
		t.Errorf("JSON: got %+v and stderr %q; want one error, in the document only", doc, errOut)
	}
}

func TestOutputViews(t *testing.T) {
	str := json.RawMessage(`"a\u001b[31mb"`)
	list := json.RawMessage(`[1,2]`)
	for _, tc := range []struct {
		name     string
		viewType arguments.ViewType
		value    json.RawMessage
		want     string
		wantErr  string
	}{
		{name: "human quotes", viewType: arguments.ViewHuman, value: str, want: `"a\u001b[31mb"` + "\n"},
		{name: "human heredoc escapes", viewType: arguments.ViewHuman, value: json.RawMessage(`"l1\nl2\u001b"`), want: "<<EOT\nl1\nl2\\x1b\nEOT\n"},
		{name: "JSON escapes", viewType: arguments.ViewJSON, value: str, want: `"a\u001b[31mb"` + "\n"},
		{name: "raw is exact", viewType: arguments.ViewRaw, value: str, want: "a\x1b[31mb"},
		{name: "raw takes only strings", viewType: arguments.ViewRaw, value: list, wantErr: `-raw prints only string outputs; "x" is not a string: use -json`},
		{name: "human list", viewType: arguments.ViewHuman, value: list, want: "[\n  1,\n  2\n]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, out, _ := newTestView()
			err := NewOutput(tc.viewType, v).Value("x", tc.value)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || out.String() != tc.want {
				t.Errorf("got %q, %v; want %q", out, err, tc.want)
			}
		})
	}

	outputs := map[string]*state.Output{"b": {Value: json.RawMessage(`"x"`)}, "a": {Sensitive: true}}
	v, out, _ := newTestView()
	_ = NewOutput(arguments.ViewRaw, v).All(outputs)
	if out.String() != "a = <sensitive>\nb = \"x\"\n" {
		t.Errorf("raw without a name lists as the human view does: got %q", out)
	}
	v, out, _ = newTestView()
	_ = NewOutput(arguments.ViewJSON, v).All(outputs)
	if !strings.Contains(out.String(), `"a": {`+"\n"+`    "sensitive": true`+"\n") || strings.Contains(out.String(), "<sensitive>") {
		t.Errorf("JSON list: got %q", out)
	}
	v, out, errOut := newTestView()
	_ = NewOutput(arguments.ViewHuman, v).All(nil)
	if out.Len() != 0 || !strings.HasPrefix(errOut.String(), "No outputs found") {
		t.Errorf("no outputs: stdout %q, stderr %q", out, errOut)
	}
}

// jsonLines decodes newline-delimited JSON events.
func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%v in %q", err, line)
		}
		evs = append(evs, m)
	}
	return evs
}

func TestApplyViews(t *testing.T) {
	var done engine.Summary
	done.Count(engine.Event{Type: engine.EventApplyComplete, Address: "run.a", Action: engine.ActionExecute})
	outputs := map[string]*state.Output{"answer": {Value: json.RawMessage(`"42"`)}}

	v, out, _ := newTestView()
	human := NewApply(arguments.ViewHuman, v)
	human.Applying()
	human.Failed(nil) // the command prints the error itself
	human.Applied(done, false, outputs)
	if want := "\n\n" + done.ApplyMessage(false) + "\n\nOutputs:\n\nanswer = \"42\"\n"; out.String() != want {
		t.Errorf("human apply: got %q, want %q", out, want)
	}
	v, out, _ = newTestView()
	NewApply(arguments.ViewHuman, v).Applied(done, true, outputs)
	if strings.Contains(out.String(), "Outputs") {
		t.Errorf("human destroy shows no outputs: got %q", out)
	}

	v, out, _ = newTestView()
	j := NewApply(arguments.ViewJSON, v)
	j.Applying()
	j.Unchanged(outputs)
	j.Event(engine.Event{Type: engine.EventApplyStart, Address: "run.a", Action: engine.ActionExecute})
	j.Applied(done, false, outputs)
	evs := jsonLines(t, out.Bytes())
	var types []string
	for _, e := range evs {
		types = append(types, e["type"].(string))
	}
	if got, want := strings.Join(types, " "), "version apply_start apply_summary outputs"; got != want {
		t.Errorf("JSON events: got %s, want %s", got, want)
	}
}

func TestPlanViews(t *testing.T) {
	p := &engine.Plan{}
	v, out, _ := newTestView()
	h := NewPlan(arguments.ViewHuman, v)
	h.Plan(p)
	h.Saved("p.plan")
	if !strings.Contains(out.String(), "No changes.") || !strings.Contains(out.String(), "agentctl apply \"p.plan\"") {
		t.Errorf("human plan: got %q", out)
	}
	v, out, _ = newTestView()
	j := NewPlan(arguments.ViewJSON, v)
	j.Plan(p)
	j.Saved("p.plan")
	evs := jsonLines(t, out.Bytes())
	if len(evs) != 2 || evs[0]["type"] != "version" || evs[1]["type"] != "change_summary" {
		t.Errorf("JSON plan: got %v", evs)
	}
}

// TestApplyStreamsWholeLines: the answers of runs streaming at once are
// printed in whole lines, each with its run and agent, never split by
// another run's text; a run's last partial line is printed when it
// finishes its answer or its run ends.
func TestApplyStreamsWholeLines(t *testing.T) {
	view, out, _ := newTestView()
	v := NewApply(arguments.ViewHuman, view)
	delta := func(run, text string) {
		v.Event(engine.Event{Type: engine.EventRuntime, Address: run, Runtime: &agentloop.Event{Type: agentloop.EventTextDelta, Agent: "writer", Text: text}})
	}
	delta("run.a", "Agent-wide ")
	delta("run.b", "Daily ")
	delta("run.a", "answer.\nSecond ")
	delta("run.b", "summary.")
	v.Event(engine.Event{Type: engine.EventRuntime, Address: "run.b", Runtime: &agentloop.Event{Type: agentloop.EventFinal, Agent: "writer"}})
	delta("run.a", "line.")
	v.Event(engine.Event{Type: engine.EventApplyComplete, Address: "run.a", Action: engine.ActionExecute})
	want := "run.a writer: Agent-wide answer.\nrun.b writer: Daily summary.\nrun.a writer: Second line.\nrun.a: Run complete after 0s\n"
	if got := out.String(); got != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
}

// TestApplyKeepsConcurrentAgentToolOutputsApart: one agent called as a
// tool twice at once streams two answers; each ends on a line of its own
// instead of being glued to the other.
func TestApplyKeepsConcurrentAgentToolOutputsApart(t *testing.T) {
	view, out, _ := newTestView()
	v := NewApply(arguments.ViewHuman, view)
	ev := func(path string, typ agentloop.EventType, text string) {
		v.Event(engine.Event{Type: engine.EventRuntime, Address: "run.r", Runtime: &agentloop.Event{Type: typ, Path: path, Agent: "scorer", Text: text}})
	}
	ev("call_1", agentloop.EventTextDelta, `{"score":`)
	ev("call_2", agentloop.EventTextDelta, `{"score":`)
	ev("call_1", agentloop.EventTextDelta, `"x"}`)
	ev("call_2", agentloop.EventTextDelta, `7}`)
	ev("call_1", agentloop.EventFinal, "")
	ev("call_2", agentloop.EventFinal, "")
	want := "run.r scorer (via tool): {\"score\":\"x\"}\nrun.r scorer (via tool): {\"score\":7}\n"
	if got := out.String(); got != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
}
