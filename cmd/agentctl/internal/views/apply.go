package views

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/state"
)

// Apply shows agentctl apply and agentctl destroy: the plan, the engine's
// events as they happen, and the outcome.
type Apply interface {
	// Plan shows the plan made before asking for approval.
	Plan(p *engine.Plan)
	// Event shows one engine event. It is safe for concurrent use.
	Event(ev engine.Event)
	// Unchanged ends an apply that had nothing to do.
	Unchanged(outputs map[string]*state.Output)
	// Applying starts the application of an approved plan.
	Applying()
	// Failed reports that the apply failed with err. The command prints
	// err itself, as diagnostics on standard error.
	Failed(err error)
	// Applied ends a successful apply: what was done and the outputs.
	Applied(done engine.Summary, destroy bool, outputs map[string]*state.Output)
	// Warning shows a warning found while applying (orphaned sandboxes).
	Warning(msg string)
}

// NewApply returns the apply view of viewType. The JSON view starts with
// the version event.
func NewApply(viewType arguments.ViewType, view *View) Apply {
	if viewType == arguments.ViewJSON {
		return &applyJSON{newJSONEvents(view.Stdout)}
	}
	return &applyHuman{View: view, events: &humanEvents{w: view.Stdout, c: view.Colors}}
}

type applyHuman struct {
	*View
	events *humanEvents
}

func (v *applyHuman) Plan(p *engine.Plan)   { renderPlan(v.Stdout, p, v.Colors) }
func (v *applyHuman) Event(ev engine.Event) { v.events.Event(ev) }
func (v *applyHuman) Applying()             { fmt.Fprintln(v.Stdout) }
func (v *applyHuman) Failed(error)          {}

func (v *applyHuman) Warning(msg string) {
	fmt.Fprintf(v.Stdout, "\n%sWarning:%s %s\n", v.Colors.Yellow+v.Colors.Bold, v.Colors.Reset, termtext.Printable(msg))
}

func (v *applyHuman) Unchanged(outputs map[string]*state.Output) {
	writeOutputs(v.Stdout, outputs)
}

func (v *applyHuman) Applied(done engine.Summary, destroy bool, outputs map[string]*state.Output) {
	fmt.Fprintf(v.Stdout, "\n%s\n", done.ApplyMessage(destroy))
	if !destroy {
		writeOutputs(v.Stdout, outputs)
	}
}

type applyJSON struct{ *jsonEvents }

func (v *applyJSON) Plan(p *engine.Plan)                { v.plan(p) }
func (v *applyJSON) Unchanged(map[string]*state.Output) {}
func (v *applyJSON) Applying()                          {}

func (v *applyJSON) Warning(msg string) {
	v.emit(map[string]any{"type": "diagnostic", "severity": "warning", "summary": msg})
}

func (v *applyJSON) Failed(err error) {
	v.emit(map[string]any{"type": "diagnostic", "severity": "error", "summary": err.Error()})
}

func (v *applyJSON) Applied(done engine.Summary, destroy bool, outputs map[string]*state.Output) {
	v.emit(map[string]any{"type": "apply_summary", "message": done.ApplyMessage(destroy), "changes": done.Counts()})
	v.emit(map[string]any{"type": "outputs", "outputs": outputs})
}

// humanEvents renders engine events for a person as they happen:
// progress lines like Terraform's and the runs' streamed model output.
type humanEvents struct {
	mu sync.Mutex
	w  io.Writer
	c  Colors
	// pending holds, per speaker ("run.NAME agent", and for a nested
	// agent-tool run its conversation's path after a NUL), model text
	// streamed since its last newline: text is printed in whole lines,
	// each with its speaker, so the answers of runs (or of one agent
	// called as a tool twice at once) streaming at once never split or
	// glue each other's lines.
	pending map[string]string
}

func ing(a engine.Action) string {
	switch a {
	case engine.ActionCreate:
		return "Creating"
	case engine.ActionUpdate:
		return "Modifying"
	case engine.ActionReplace:
		return "Replacing"
	case engine.ActionRestore:
		return "Restoring"
	case engine.ActionImport:
		return "Importing"
	case engine.ActionDelete:
		return "Destroying"
	case engine.ActionExecute:
		return "Executing"
	case engine.ActionRerun:
		return "Re-running"
	case engine.ActionResume:
		return "Resuming"
	case engine.ActionForget:
		return "Forgetting"
	}
	return "Working on"
}

func done(a engine.Action) string {
	switch a {
	case engine.ActionCreate:
		return "Creation complete"
	case engine.ActionUpdate:
		return "Modifications complete"
	case engine.ActionReplace:
		return "Replacement complete"
	case engine.ActionRestore:
		return "Restore complete"
	case engine.ActionImport:
		return "Import complete"
	case engine.ActionDelete:
		return "Destruction complete"
	case engine.ActionForget:
		return "Removed from state"
	}
	return "Run complete"
}

// endText prints what is pending of the speakers of run address addr
// ("" for every run) as their last lines.
func (v *humanEvents) endText(addr string) {
	for _, who := range slices.Sorted(maps.Keys(v.pending)) {
		if addr == "" || strings.HasPrefix(who, addr+" ") {
			v.line(who, v.pending[who])
			delete(v.pending, who)
		}
	}
}

// endSpeaker prints what is pending of one speaker.
func (v *humanEvents) endSpeaker(speaker string) {
	if text, ok := v.pending[speaker]; ok {
		v.line(speaker, text)
		delete(v.pending, speaker)
	}
}

func (v *humanEvents) line(speaker, text string) {
	who, _, _ := strings.Cut(speaker, "\x00")
	fmt.Fprintf(v.w, "%s%s:%s %s\n", v.c.Cyan, who, v.c.Reset, termtext.Printable(text))
}

// Event renders one engine event.
func (v *humanEvents) Event(ev engine.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.c
	switch ev.Type {
	case engine.EventApplyStart:
		v.endText(ev.Address)
		fmt.Fprintf(v.w, "%s%s: %s...%s\n", c.Bold, ev.Address, ing(ev.Action), c.Reset)
	case engine.EventApplyProgress:
		v.endText(ev.Address)
		switch {
		case ev.Message != "" && ev.Address == "":
			// About the apply as a whole (-record's summary).
			fmt.Fprintln(v.w, termtext.Printable(ev.Message))
			return
		case ev.Message != "":
			fmt.Fprintf(v.w, "%s: %s\n", ev.Address, termtext.Printable(ev.Message))
			return
		}
		fmt.Fprintf(v.w, "%s: Still %s... [%s elapsed]\n", ev.Address, strings.ToLower(ing(ev.Action)), ev.Elapsed.Round(time.Second))
	case engine.EventApplyComplete:
		v.endText(ev.Address)
		if ev.Action == engine.ActionNoop {
			fmt.Fprintf(v.w, "%s%s: Unchanged: %s%s\n", c.Bold, ev.Address, termtext.Printable(ev.Message), c.Reset)
			return
		}
		fmt.Fprintf(v.w, "%s%s: %s after %s%s\n", c.Bold, ev.Address, done(ev.Action), ev.Elapsed.Round(time.Second), c.Reset)
	case engine.EventApplyErrored:
		v.endText(ev.Address)
		fmt.Fprintf(v.w, "%s%s: failed after %s%s\n", c.Red+c.Bold, ev.Address, ev.Elapsed.Round(time.Second), c.Reset)
	case engine.EventApplyInterrupted:
		v.endText(ev.Address)
		fmt.Fprintf(v.w, "%s%s: Interrupted after %s; checkpointed%s\n", c.Yellow+c.Bold, ev.Address, ev.Elapsed.Round(time.Second), c.Reset)
	case engine.EventApplyWaiting:
		v.endText(ev.Address)
		fmt.Fprintf(v.w, "%s%s: %s%s\n", c.Yellow+c.Bold, ev.Address, termtext.Printable(ev.Message), c.Reset)
	case engine.EventApprovalRequired:
		v.endText(ev.Address)
		fmt.Fprintf(v.w, "%s%s: Awaiting approval of %d tool call(s)%s\n", c.Yellow+c.Bold, ev.Address, len(ev.Approvals), c.Reset)
		for _, a := range ev.Approvals {
			fmt.Fprintf(v.w, "  %s %s %s\n", termtext.Printable(a.CallID), termtext.Printable(a.Tool), oneLine(a.Arguments, 200))
		}
		fmt.Fprintf(v.w, "  Decide with agentctl approve %s CALL_ID (or -all) or agentctl reject %s CALL_ID -reason TEXT, then apply again.\n", ev.Address, ev.Address)
	case engine.EventRuntime:
		v.runtime(ev.Address, ev.Runtime)
	}
}

func (v *humanEvents) runtime(addr string, e *agentloop.Event) {
	c := v.c
	who := termtext.Printable(addr + " " + e.Agent)
	speaker := who
	if e.Path != "" {
		who += " (via tool)"
		speaker = who + "\x00" + e.Path
	}
	switch e.Type {
	case agentloop.EventTextDelta:
		if v.pending == nil {
			v.pending = map[string]string{}
		}
		text := v.pending[speaker] + e.Text
		for {
			line, rest, ok := strings.Cut(text, "\n")
			if !ok {
				break
			}
			v.line(speaker, line)
			text = rest
		}
		v.pending[speaker] = text
		return
	case agentloop.EventToolCall:
		v.endSpeaker(speaker)
		fmt.Fprintf(v.w, "%s%s → %s%s %s\n", c.Cyan, who, oneLine(e.Name, 100), c.Reset, oneLine(e.Arguments, 200))
	case agentloop.EventToolResult:
		v.endSpeaker(speaker)
		mark := "←"
		if e.IsError {
			mark = c.Yellow + "← (error)" + c.Reset
		}
		fmt.Fprintf(v.w, "%s %s %s: %s\n", who, mark, oneLine(e.Name, 100), oneLine(e.Text, 200))
	case agentloop.EventHostedToolCall:
		v.endSpeaker(speaker)
		fmt.Fprintf(v.w, "%s%s → hosted %s%s: %s\n", c.Cyan, who, oneLine(e.Name, 100), c.Reset, oneLine(e.Text, 200))
	case agentloop.EventHandoff:
		v.endSpeaker(speaker)
		fmt.Fprintf(v.w, "%s%s hands off to %s%s\n", c.Bold, who, oneLine(e.Text, 100), c.Reset)
	case agentloop.EventAgentToolCall:
		v.endSpeaker(speaker)
		fmt.Fprintf(v.w, "%s calls agent %s as tool %s\n", who, oneLine(e.Text, 100), oneLine(e.Name, 100))
	case agentloop.EventCompaction:
		v.endSpeaker(speaker)
		fmt.Fprintf(v.w, "%s compacts its conversation: %s\n", who, oneLine(e.Text, 200))
	case agentloop.EventRetry:
		v.endSpeaker(who)
		fmt.Fprintf(v.w, "%s%s:%s %s\n", c.Yellow, who, c.Reset, oneLine(e.Text, 200))
	case agentloop.EventPolicyError:
		v.endSpeaker(speaker)
		fmt.Fprintf(v.w, "%sWarning:%s %s: the approval policy of %s failed, so call %s was refused: %s\n", c.Yellow, c.Reset, who, oneLine(e.Name, 100), oneLine(e.CallID, 100), oneLine(e.Text, 400))
	case agentloop.EventFinal:
		v.endSpeaker(speaker)
	}
}

// oneLine renders text from a model or a tool on one line for the
// terminal: runs of white space become one space, the text is cut after n
// runes, and control and format characters are shown escaped.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		cut := 0
		for range n {
			_, size := utf8.DecodeRuneInString(s[cut:])
			cut += size
		}
		s = s[:cut] + "…"
	}
	return termtext.Printable(s)
}

// jsonEvents writes newline-delimited JSON events, each with a type, the
// way Terraform's -json output does; the first is the version event.
type jsonEvents struct {
	mu sync.Mutex
	w  io.Writer
}

func newJSONEvents(w io.Writer) *jsonEvents {
	j := &jsonEvents{w: w}
	j.emit(map[string]any{"type": "version", "agentctl": config.Version, "ui": "1.0"})
	return j
}

// emit writes one event. Text keeps its exact value; characters that
// could drive a terminal are JSON-escaped (termtext.JSON).
func (j *jsonEvents) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.w.Write(append(termtext.JSON(b), '\n'))
}

// Event writes an engine event.
func (j *jsonEvents) Event(ev engine.Event) {
	m := map[string]any{"type": string(ev.Type), "address": ev.Address}
	if ev.Action != "" {
		m["action"] = ev.Action
	}
	if ev.Message != "" {
		m["message"] = ev.Message
	}
	if ev.Elapsed > 0 {
		m["elapsed_seconds"] = ev.Elapsed.Seconds()
	}
	if len(ev.Approvals) > 0 {
		m["approvals"] = ev.Approvals
	}
	if ev.Runtime != nil {
		m["type"] = string(ev.Runtime.Type)
		m["run_event"] = ev.Runtime
	}
	j.emit(m)
}

// plan writes each planned change, the plan's warnings (as diagnostics),
// its notes (plan_note) and the summary as events.
func (j *jsonEvents) plan(p *engine.Plan) {
	for _, d := range p.Drift {
		j.emit(map[string]any{"type": "resource_drift", "drift": d})
	}
	for _, c := range p.Changes {
		if c.Action == engine.ActionNoop {
			continue
		}
		j.emit(map[string]any{"type": "planned_change", "change": c})
	}
	for _, msg := range p.Warnings {
		j.emit(map[string]any{"type": "diagnostic", "severity": "warning", "summary": msg})
	}
	for _, n := range p.Notes {
		j.emit(map[string]any{"type": "plan_note", "address": n.Address, "message": n.Message})
	}
	s := p.Summary()
	if p.RefreshOnly {
		j.emit(map[string]any{"type": "change_summary", "operation": "refresh", "changes": s.Counts(), "drift": len(p.Drift),
			"message": refreshSummary(p)})
		return
	}
	j.emit(map[string]any{"type": "change_summary", "changes": s.Counts(), "message": s.String()})
}
