package views

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statefile"
)

// Show shows agentctl show: the state, one run, one sandbox, or a saved
// plan.
type Show interface {
	// SavedPlan shows a saved plan file.
	SavedPlan(pf *statefile.PlanFile) error
	// State shows a summary of the whole state.
	State(st *state.State) error
	// Run shows a run and its transcript.
	Run(r *state.Run, steps []agentloop.Step) error
	// Sandbox shows a sandbox.
	Sandbox(s *state.Sandbox) error
	// Chat shows a chat session and its conversation.
	Chat(c *state.Chat, history []model.Item) error
}

// NewShow returns the show view of viewType.
func NewShow(viewType arguments.ViewType, view *View) Show {
	if viewType == arguments.ViewJSON {
		return showJSON{view}
	}
	return showHuman{view}
}

// showJSON prints the objects as stored, for programs.
type showJSON struct{ *View }

func (v showJSON) SavedPlan(pf *statefile.PlanFile) error {
	_, err := v.Stdout.Write(append(termtext.JSON(pf.Plan), '\n'))
	return err
}

func (v showJSON) State(st *state.State) error { return writeJSON(v.Stdout, st) }

func (v showJSON) Run(r *state.Run, steps []agentloop.Step) error {
	return writeJSON(v.Stdout, map[string]any{"run": r, "steps": steps})
}

func (v showJSON) Sandbox(s *state.Sandbox) error { return writeJSON(v.Stdout, s) }

func (v showJSON) Chat(c *state.Chat, history []model.Item) error {
	return writeJSON(v.Stdout, struct {
		*state.Chat
		History []model.Item `json:"history"`
	}{c, history})
}

type showHuman struct{ *View }

func (v showHuman) SavedPlan(pf *statefile.PlanFile) error {
	p := &engine.Plan{}
	if err := json.Unmarshal(pf.Plan, p); err != nil {
		return fmt.Errorf("reading the saved plan: %w", err)
	}
	fmt.Fprintf(v.Stdout, "Saved plan for %s (state lineage %s, serial %d)\n", pf.ConfigDir, pf.Lineage, pf.Serial)
	renderPlan(v.Stdout, p, v.Colors)
	return nil
}

func (v showHuman) State(st *state.State) error {
	w := v.Stdout
	if len(st.Sandboxes) == 0 && len(st.Runs) == 0 && len(st.Chats) == 0 {
		fmt.Fprintln(w, "The state is empty: nothing has been applied yet.")
		return nil
	}
	for _, addr := range st.SandboxAddresses() {
		s := st.Sandboxes[addr]
		fmt.Fprintf(w, "# %s (%s, %s)\n", addr, s.Kind, s.Status)
		fmt.Fprintf(w, "    id       = %s\n", termtext.Line(s.Session.ID))
		for port, u := range s.URLs {
			fmt.Fprintf(w, "    url %s = %s\n", termtext.Line(port), termtext.Line(u))
		}
		if s.Snapshot != "" {
			fmt.Fprintf(w, "    snapshot = %s\n", termtext.Line(s.Snapshot))
		}
	}
	for _, addr := range st.RunAddresses() {
		r := st.Runs[addr]
		fmt.Fprintf(w, "# %s (%s, %d turns, %d input + %d output tokens%s)\n", addr, r.Status, r.Turns, r.Usage.InputTokens, r.Usage.OutputTokens, spentText(r))
		if r.Error != "" {
			fmt.Fprintf(w, "    error  = %s\n", termtext.Printable(r.Error))
		}
		if g := r.Guardrail; g != nil {
			fmt.Fprintf(w, "    guardrail = %s (%s): %s\n", termtext.Line(g.Name), g.On, termtext.Line(g.Message))
		}
		if len(r.Output) > 0 {
			fmt.Fprintf(w, "    output = %s\n", firstLines(renderValue(r.Output), 3))
		}
	}
	for _, addr := range st.ChatAddresses() {
		c := st.Chats[addr]
		fmt.Fprintf(w, "# %s (agent.%s, %s, %d %s)\n", addr, termtext.Line(c.Agent), c.Status, c.Turns, plural(c.Turns, "turn", "turns"))
	}
	for _, key := range slices.Sorted(maps.Keys(st.Memories)) {
		m := st.Memories[key]
		fmt.Fprintf(w, "# memory %s (%d extracted, %d %s, %d calls, %d input + %d output tokens)\n", termtext.Line(key),
			m.Extracted, m.Consolidations, plural(m.Consolidations, "consolidation", "consolidations"), m.Calls, m.Usage.InputTokens, m.Usage.OutputTokens)
		if m.Pending() {
			fmt.Fprintf(w, "    waiting = %d to extract, %d to consolidate (the next apply does it)\n", len(m.Phase1), len(m.Phase2))
		}
	}
	writeOutputs(w, st.Outputs)
	return nil
}

func (v showHuman) Chat(c *state.Chat, history []model.Item) error {
	w := v.Stdout
	fmt.Fprintf(w, "# %s\n", c.Address)
	fmt.Fprintf(w, "    agent  = agent.%s\n", termtext.Line(c.Agent))
	fmt.Fprintf(w, "    status = %s\n", c.Status)
	fmt.Fprintf(w, "    turns  = %d\n", c.Turns)
	fmt.Fprintf(w, "    usage  = %d input + %d output tokens\n", c.Usage.InputTokens, c.Usage.OutputTokens)
	if c.Status == state.ChatRunning {
		fmt.Fprintf(w, "    interrupted turn = %s\n", termtext.Line(c.Input))
	}
	fmt.Fprintln(w)
	WriteHistory(w, history)
	return nil
}

func (v showHuman) Run(r *state.Run, steps []agentloop.Step) error {
	showRun(v.Stdout, r, steps)
	return nil
}

func (v showHuman) Sandbox(s *state.Sandbox) error {
	showSandbox(v.Stdout, s)
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n             ")
}

func showSandbox(w io.Writer, s *state.Sandbox) {
	fmt.Fprintf(w, "# %s\n", s.Address)
	fmt.Fprintf(w, "provider        = %s (%s)\n", s.Provider, s.Kind)
	fmt.Fprintf(w, "id              = %s\n", termtext.Line(s.Session.ID))
	fmt.Fprintf(w, "status          = %s\n", s.Status)
	fmt.Fprintf(w, "manifest_digest = %s\n", s.ManifestDigest)
	for _, p := range slices.Sorted(maps.Keys(s.EntryDigests)) {
		fmt.Fprintf(w, "entry %-10q  = %s\n", p, termtext.Line(s.EntryDigests[p]))
	}
	for _, p := range slices.Sorted(maps.Keys(s.URLs)) {
		fmt.Fprintf(w, "url %-12s = %s\n", termtext.Line(p), termtext.Line(s.URLs[p]))
	}
	if s.Snapshot != "" {
		fmt.Fprintf(w, "snapshot        = %s (%s)\n", termtext.Line(s.Snapshot), termtext.Line(digest.Named(s.SnapshotDigest)))
	}
	if p := s.RestorePending; p != nil {
		why := "agentctl stopped during it"
		if p.Error != "" {
			why = termtext.Printable(p.Error)
		}
		fmt.Fprintf(w, "restore_pending = the last restore did not finish (%s); apply restores it again\n", why)
	}
}

// showRun prints a run's transcript: the input, each model turn's text and
// tool calls, each tool result, handoffs, and the provenance.
func showRun(w io.Writer, r *state.Run, steps []agentloop.Step) {
	fmt.Fprintf(w, "# %s: %s, agent.%s, %d turns\n", r.Address, r.Status, r.Agent, r.Turns)
	turn := 0
	for _, s := range steps {
		indent := strings.Repeat("    ", strings.Count(s.Path, "/")+boolInt(s.Path != ""))
		switch s.Kind {
		case agentloop.StepInput:
			if s.Path == "" {
				if len(s.Prior) > 0 {
					fmt.Fprintf(w, "\n[continues a conversation of %d items]\n", len(s.Prior))
				}
				fmt.Fprintf(w, "\n%s[input → %s]\n%s%s\n", indent, s.Agent, indent, indented(s.Input, indent))
			} else {
				fmt.Fprintf(w, "%s[agent tool run of %s] input: %s\n", indent, s.Agent, indented(s.Input, indent+"  "))
			}
		case agentloop.StepModel:
			if s.Path == "" {
				turn++
			}
			showModelStep(w, indent, turn, s)
		case agentloop.StepTool:
			out := s.Result.Output
			if len(s.Result.Images) > 0 {
				out += fmt.Sprintf(" [%d image(s)]", len(s.Result.Images))
			}
			fmt.Fprintf(w, "%s← %s\n", indent, indented(strings.TrimRight(out, "\n"), indent+"  "))
			if s.Handoff != "" && s.InputFilter != nil {
				fmt.Fprintf(w, "%s(handed off to %s, given the conversation with %s)\n", indent, termtext.Line(s.Handoff), s.InputFilter)
			} else if s.Handoff != "" {
				fmt.Fprintf(w, "%s(handed off to %s)\n", indent, termtext.Line(s.Handoff))
			}
		case agentloop.StepCompaction:
			if s.Compacted == nil {
				continue
			}
			fmt.Fprintf(w, "\n%s[compaction, %s: %d older items replaced by a summary]\n%s%s\n", indent, s.Agent,
				s.Compacted.Items-s.Compacted.Head-s.Compacted.Tail, indent, indented(s.Compacted.Summary, indent))
		case agentloop.StepApproval:
			if s.Approval == nil {
				continue
			}
			fmt.Fprintf(w, "%s(awaiting approval: %s %s)\n", indent, termtext.Line(s.Approval.Tool), termtext.Line(s.Approval.CallID))
		}
	}
	if len(r.Output) > 0 {
		fmt.Fprintf(w, "\nOutput: %s\n", renderValue(r.Output))
	}
	if r.Error != "" {
		fmt.Fprintf(w, "\nError: %s\n", termtext.Printable(r.Error))
	}
	if g := r.Guardrail; g != nil {
		fmt.Fprintf(w, "Guardrail: %s (%s) tripped: %s\n", termtext.Line(g.Name), g.On, termtext.Line(g.Message))
	}
	showApprovals(w, r)
	p := r.Provenance
	fmt.Fprintf(w, "\nProvenance: config %s", short(p.ConfigDigest))
	if p.GitCommit != "" {
		fmt.Fprintf(w, ", git commit %s", short(p.GitCommit))
	}
	if len(p.Models) > 0 {
		fmt.Fprintf(w, ", models %s", termtext.Line(strings.Join(p.Models, ", ")))
	}
	fmt.Fprintf(w, ", usage %d input / %d output tokens%s", r.Usage.InputTokens, r.Usage.OutputTokens, spentText(r))
	if mu := r.MemoryUsage; mu.InputTokens+mu.OutputTokens > 0 {
		fmt.Fprintf(w, ", memory %d input / %d output tokens", mu.InputTokens, mu.OutputTokens)
	}
	fmt.Fprintln(w)
	if r.TraceID != "" {
		fmt.Fprintf(w, "Trace: %s\n", termtext.Line(r.TraceID))
	}
}

// showModelStep prints one model turn: who answered (the model too, when
// one of the agent's fallback models did, and why the ones before did
// not), its text, its function calls and its hosted tool calls.
func showModelStep(w io.Writer, indent string, turn int, s agentloop.Step) {
	if m := s.Response.Model; m != "" {
		fmt.Fprintf(w, "\n%s[turn %d, %s, answered by %s]\n", indent, turn, s.Agent, termtext.Line(m))
		for _, why := range s.Response.Fallbacks {
			fmt.Fprintf(w, "%s(model_fallback after %s)\n", indent, termtext.Line(why))
		}
	} else {
		fmt.Fprintf(w, "\n%s[turn %d, %s]\n", indent, turn, s.Agent)
	}
	for _, it := range s.Response.Output {
		switch it.Type {
		case model.ItemMessage:
			fmt.Fprintf(w, "%s%s\n", indent, indented(it.Text, indent))
		case model.ItemFunctionCall:
			fmt.Fprintf(w, "%s→ %s %s\n", indent, termtext.Line(it.Name), termtext.Line(it.Arguments))
		case model.ItemHostedToolCall:
			fmt.Fprintf(w, "%s→ hosted %s: %s\n", indent, termtext.Line(it.Name), termtext.Line(it.Text))
		}
	}
}

// spentText is what a run spent besides tokens, as its budgets count it:
// ", 3 tool calls, 12.5s running" (empty for a run that recorded none).
func spentText(r *state.Run) string {
	var b strings.Builder
	if r.ToolCalls > 0 {
		fmt.Fprintf(&b, ", %d %s", r.ToolCalls, plural(r.ToolCalls, "tool call", "tool calls"))
	}
	if r.RunningTime > 0 {
		fmt.Fprintf(&b, ", %s running", r.RunningTime.Round(time.Millisecond))
	}
	return b.String()
}

// showApprovals lists the run's calls that needed approval: pending ones
// with their ids, decided ones with who, when and why; then its standing
// decisions.
func showApprovals(w io.Writer, r *state.Run) {
	if len(r.Approvals) > 0 {
		fmt.Fprintf(w, "\nApprovals:\n")
	}
	for _, a := range r.Approvals {
		fmt.Fprintf(w, "  %s %s %s (agent.%s)\n", termtext.Line(a.CallID), termtext.Line(a.Tool), termtext.Line(a.Arguments), termtext.Line(a.Agent))
		if a.Decision == state.ApprovalPending {
			fmt.Fprintf(w, "    pending since %s\n", a.RequestedAt.Format(time.RFC3339))
			continue
		}
		reason := ""
		if a.Reason != "" {
			reason = ": " + termtext.Line(a.Reason)
		}
		fmt.Fprintf(w, "    %s by %s at %s%s\n", a.Decision, termtext.Line(a.DecidedBy), a.DecidedAt.Format(time.RFC3339), reason)
	}
	showToolDecisions(w, r)
}

// showToolDecisions lists the run's standing decisions: the tools whose
// later calls are approved or rejected without asking.
func showToolDecisions(w io.Writer, r *state.Run) {
	if len(r.ToolDecisions) == 0 {
		return
	}
	fmt.Fprintf(w, "\nStanding decisions (every later call of the tool, without asking; agentctl approve|reject %s -tool NAME -revoke withdraws one):\n", r.Address)
	for _, tool := range slices.Sorted(maps.Keys(r.ToolDecisions)) {
		d := r.ToolDecisions[tool]
		reason := ""
		if d.Reason != "" {
			reason = ": " + termtext.Line(d.Reason)
		}
		fmt.Fprintf(w, "  %s %s (%s) by %s at %s%s\n", termtext.Line(tool), d.Decision, d.Word(), termtext.Line(d.DecidedBy), d.DecidedAt.Format(time.RFC3339), reason)
	}
}

// indented shows text from a model, a tool or a file for the terminal,
// its continuation lines indented by indent: control and format
// characters are shown escaped, newlines and tabs are kept.
func indented(s, indent string) string {
	s = termtext.Printable(s)
	if indent == "" {
		return s
	}
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
