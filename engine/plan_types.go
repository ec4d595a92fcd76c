package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/engine/agentmemory"
)

// Action is what plan decided for one managed object.
type Action string

const (
	ActionNoop Action = "no-op"
	// Sandbox actions.
	ActionCreate  Action = "create"
	ActionUpdate  Action = "update"
	ActionReplace Action = "replace"
	ActionRestore Action = "restore"
	ActionDelete  Action = "delete"
	// ActionImport adopts an existing sandbox (an import block, agentctl
	// import): its id is the change's "id" attribute.
	ActionImport Action = "import"
	// Run actions.
	ActionExecute Action = "execute"
	ActionRerun   Action = "re-run"
	ActionResume  Action = "resume"
	ActionForget  Action = "forget"
)

// Kind of a managed object.
const (
	KindSandbox = "sandbox"
	KindRun     = "run"
	// KindChat is an agentctl chat session's record, which destroy
	// forgets.
	KindChat = "chat"
)

// Change is the planned action for one sandbox or run, with the reasons
// a reviewer needs.
type Change struct {
	Address string   `json:"address"`
	Kind    string   `json:"kind"`
	Action  Action   `json:"action"`
	Reasons []string `json:"reasons,omitempty"`
	// Attributes shown in the plan (provider, image, agent, input, ...).
	Attributes map[string]string `json:"attributes,omitempty"`
	// Entries are the manifest entries an update materializes; Removed
	// the entries that are no longer declared (left in the workspace).
	Entries []string `json:"entries,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Digest is a run's planned digest ("" when it depends on runs that
	// execute first and is known only during apply).
	Digest string `json:"digest,omitempty"`
}

// Plan is the set of changes apply would make.
type Plan struct {
	Destroy bool     `json:"destroy,omitempty"`
	Targets []string `json:"targets,omitempty"`
	// Excludes are the -exclude addresses: they and what depends on them
	// are left out.
	Excludes []string  `json:"excludes,omitempty"`
	Replace  []string  `json:"replace,omitempty"`
	Changes  []*Change `json:"changes"`
	// Lineage and Serial of the state the plan was made against.
	Lineage string `json:"lineage"`
	Serial  uint64 `json:"serial"`
	// Memory is the memory work waiting from an earlier apply, which this
	// apply finishes (engine/agentmemory).
	Memory []agentmemory.Work `json:"memory,omitempty"`
	// Warnings are what the plan could not check but apply will need
	// (an MCP server that could not be reached), each a sentence or two.
	Warnings []string `json:"warnings,omitempty"`
	// Notes are what a reviewer should know about objects the plan
	// leaves as they are: a sandbox that lives in another working
	// directory or on another machine.
	Notes []Note `json:"notes,omitempty"`
	// RefreshOnly marks a plan -refresh-only: it has no changes, only
	// Drift, which applying records in the state.
	RefreshOnly bool    `json:"refresh_only,omitempty"`
	Drift       []Drift `json:"drift,omitempty"`
}

// Note is a plan note about one object.
type Note struct {
	Address string `json:"address"`
	Message string `json:"message"`
}

// Change returns the change for addr, or nil.
func (p *Plan) Change(addr string) *Change {
	for _, c := range p.Changes {
		if c.Address == addr {
			return c
		}
	}
	return nil
}

// Summary counts actions the way a plan's or an apply's last line reports
// them. Resources are sandboxes; runs are counted apart, and forgetting a
// run's record (Forget) destroys no resource.
type Summary struct {
	Import                  int
	Create, Change, Destroy int
	Execute, Resume, Forget int
	// Chats counts chat sessions forgotten.
	Chats int
	// Awaiting counts runs that ended awaiting approval.
	Awaiting int
}

// Summary counts the plan's actions.
func (p *Plan) Summary() Summary {
	var s Summary
	for _, c := range p.Changes {
		if c.Kind == KindChat {
			s.Chats++
			continue
		}
		s.Add(c.Action)
	}
	return s
}

// Add counts one action: a replace counts as one create and one destroy,
// a restore as a create, a re-run as an execution.
func (s *Summary) Add(a Action) {
	switch a {
	case ActionImport:
		s.Import++
	case ActionCreate, ActionRestore:
		s.Create++
	case ActionUpdate:
		s.Change++
	case ActionReplace:
		s.Create++
		s.Destroy++
	case ActionDelete:
		s.Destroy++
	case ActionExecute, ActionRerun:
		s.Execute++
	case ActionResume:
		s.Resume++
	case ActionForget:
		s.Forget++
	}
}

// Count adds what an apply event reports done: an EventApplyComplete
// counts its action (a run found unchanged once its upstream runs had
// finished completes as ActionNoop and counts nothing).
func (s *Summary) Count(ev Event) {
	if ev.Type == EventApplyComplete && strings.HasPrefix(ev.Address, KindChat+".") {
		s.Chats++
		return
	}
	if ev.Type == EventApplyComplete {
		s.Add(ev.Action)
	}
	if ev.Type == EventApprovalRequired {
		s.Awaiting++
	}
}

// HasChanges reports whether applying the plan would do anything.
func (p *Plan) HasChanges() bool {
	if p.RefreshOnly {
		return len(p.Drift) > 0
	}
	if len(p.Memory) > 0 {
		return true
	}
	for _, c := range p.Changes {
		if c.Action != ActionNoop {
			return true
		}
	}
	return false
}

// String is the plan's summary line.
func (s Summary) String() string {
	return fmt.Sprintf("Plan: %s%d to create, %d to change, %d to destroy; %d %s to execute, %d to resume%s.",
		s.imports("to import"), s.Create, s.Change, s.Destroy, s.Execute, plural(s.Execute, "run", "runs"), s.Resume, s.forgets("to forget"))
}

// ApplyMessage is the last line of a successful apply, or of a destroy.
func (s Summary) ApplyMessage(destroy bool) string {
	if destroy {
		return fmt.Sprintf("Destroy complete! Resources: %d destroyed%s.", s.Destroy, s.forgets("forgotten"))
	}
	awaiting := ""
	if s.Awaiting > 0 {
		awaiting = fmt.Sprintf("; %d %s awaiting approval", s.Awaiting, plural(s.Awaiting, "run", "runs"))
	}
	return fmt.Sprintf("Apply complete! Resources: %s%d added, %d changed, %d destroyed; %d %s executed, %d resumed%s%s.",
		s.imports("imported"), s.Create, s.Change, s.Destroy, s.Execute, plural(s.Execute, "run", "runs"), s.Resume, s.forgets("forgotten"), awaiting)
}

// Counts is the summary as -json's change_summary and apply_summary
// events report it.
func (s Summary) Counts() map[string]int {
	m := map[string]int{"add": s.Create, "change": s.Change, "remove": s.Destroy, "execute": s.Execute, "resume": s.Resume, "forget": s.Forget}
	if s.Import > 0 {
		m["import"] = s.Import
	}
	return m
}

// imports is "N WHAT, " when sandboxes are imported, "" otherwise.
func (s Summary) imports(what string) string {
	if s.Import == 0 {
		return ""
	}
	return fmt.Sprintf("%d %s, ", s.Import, what)
}

// forgets is "; N run record(s) WHAT", or "" when no record goes.
func (s Summary) forgets(what string) string {
	out := ""
	if s.Forget > 0 {
		out = fmt.Sprintf("; %d %s %s", s.Forget, plural(s.Forget, "run record", "run records"), what)
	}
	if s.Chats > 0 {
		out += fmt.Sprintf("; %d %s %s", s.Chats, plural(s.Chats, "chat session", "chat sessions"), what)
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// sortChanges orders sandboxes before runs, then by address.
func sortChanges(cs []*Change) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Kind != cs[j].Kind {
			return cs[i].Kind == KindSandbox
		}
		return cs[i].Address < cs[j].Address
	})
}
