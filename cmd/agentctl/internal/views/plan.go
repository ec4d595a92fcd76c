// Package views renders engine results for people (Terraform-style text)
// and for machines (newline-delimited JSON events), kept apart from
// argument parsing and from the engine.
package views

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/internal/termtext"
)

// Colors are ANSI sequences, empty with -no-color.
type Colors struct {
	Green, Yellow, Red, Cyan, Bold, Reset string
}

// NewColors returns the palette; enabled=false gives no escape codes.
func NewColors(enabled bool) Colors {
	if !enabled {
		return Colors{}
	}
	return Colors{Green: "\x1b[32m", Yellow: "\x1b[33m", Red: "\x1b[31m", Cyan: "\x1b[36m", Bold: "\x1b[1m", Reset: "\x1b[0m"}
}

// symbol is the Terraform-style marker of an action.
func symbol(c Colors, a engine.Action) string {
	switch a {
	case engine.ActionCreate, engine.ActionExecute:
		return c.Green + "+" + c.Reset
	case engine.ActionUpdate:
		return c.Yellow + "~" + c.Reset
	case engine.ActionReplace, engine.ActionRerun:
		return c.Red + "-" + c.Reset + "/" + c.Green + "+" + c.Reset
	case engine.ActionRestore:
		return c.Green + "<" + c.Reset
	case engine.ActionImport:
		return c.Cyan + "<=" + c.Reset
	case engine.ActionResume:
		return c.Cyan + ">" + c.Reset
	case engine.ActionDelete, engine.ActionForget:
		return c.Red + "-" + c.Reset
	}
	return " "
}

// verb is the "will be ..." phrase of an action.
func verb(a engine.Action) string {
	switch a {
	case engine.ActionCreate:
		return "created"
	case engine.ActionUpdate:
		return "updated in-place"
	case engine.ActionReplace:
		return "replaced"
	case engine.ActionRestore:
		return "restored from its snapshot"
	case engine.ActionImport:
		return "imported"
	case engine.ActionDelete:
		return "destroyed"
	case engine.ActionExecute:
		return "executed"
	case engine.ActionRerun:
		return "re-run"
	case engine.ActionResume:
		return "resumed"
	case engine.ActionForget:
		return "removed from the state"
	}
	return string(a)
}

// Plan shows agentctl plan.
type Plan interface {
	// Plan shows the plan.
	Plan(p *engine.Plan)
	// Saved reports that the plan was saved to path (-out).
	Saved(path string)
}

// NewPlan returns the plan view of viewType. The JSON view starts with
// the version event.
func NewPlan(viewType arguments.ViewType, view *View) Plan {
	if viewType == arguments.ViewJSON {
		return planJSON{newJSONEvents(view.Stdout)}
	}
	return planHuman{view}
}

type planHuman struct{ *View }

func (v planHuman) Plan(p *engine.Plan) { renderPlan(v.Stdout, p, v.Colors) }

func (v planHuman) Saved(path string) {
	fmt.Fprintf(v.Stdout, "\nSaved the plan to: %s\n\nTo perform exactly these actions, run the following command to apply:\n    agentctl apply %q\n", path, path)
}

type planJSON struct{ *jsonEvents }

func (v planJSON) Plan(p *engine.Plan) { v.plan(p) }

// Saved prints nothing: the JSON stream holds only events.
func (v planJSON) Saved(string) {}

// renderPlan prints a plan the way terraform plan does: a legend, one
// block per object that changes, and the summary line.
func renderPlan(w io.Writer, p *engine.Plan, c Colors) {
	if p.RefreshOnly {
		renderRefreshOnly(w, p, c)
		return
	}
	if !p.HasChanges() {
		fmt.Fprintf(w, "\n%sNo changes.%s Your sandboxes and runs match the configuration.\n\n", c.Green+c.Bold, c.Reset)
		fmt.Fprintln(w, "agentctl compared your configuration with the state and found no differences, so no changes are needed.")
		targetWarning(w, p, c)
		planWarnings(w, p, c)
		planNotes(w, p, c)
		return
	}
	used := map[engine.Action]bool{}
	for _, ch := range p.Changes {
		used[ch.Action] = true
	}
	fmt.Fprintln(w, "\nagentctl used the selected providers to generate the following execution plan. Resource actions are indicated with the following symbols:")
	for _, a := range []engine.Action{engine.ActionImport, engine.ActionCreate, engine.ActionExecute, engine.ActionUpdate, engine.ActionReplace, engine.ActionRerun, engine.ActionRestore, engine.ActionResume, engine.ActionDelete, engine.ActionForget} {
		if used[a] {
			fmt.Fprintf(w, "  %s %s\n", symbol(c, a), legend(a))
		}
	}
	fmt.Fprintln(w, "\nagentctl will perform the following actions:")
	for _, ch := range p.Changes {
		if ch.Action == engine.ActionNoop {
			continue
		}
		fmt.Fprintf(w, "\n%s  # %s will be %s%s\n", c.Bold, ch.Address, verb(ch.Action), c.Reset)
		for _, r := range ch.Reasons {
			fmt.Fprintf(w, "  # (%s)\n", termtext.Printable(r))
		}
		kind, name := ch.Kind, ch.Address[strings.IndexByte(ch.Address, '.')+1:]
		fmt.Fprintf(w, "  %s %s %s {\n", symbol(c, ch.Action), kind, quoteName(name))
		keys := make([]string, 0, len(ch.Attributes))
		for k := range ch.Attributes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		width := 0
		for _, k := range keys {
			width = max(width, len(k))
		}
		for _, k := range keys {
			fmt.Fprintf(w, "      %-*s = %s\n", width, k, quoteValue(ch.Attributes[k]))
		}
		for _, e := range ch.Entries {
			fmt.Fprintf(w, "      %s entry %q\n", symbol(c, engine.ActionUpdate), e)
		}
		for _, e := range ch.Removed {
			fmt.Fprintf(w, "      # entry %q is no longer declared and is left in the workspace\n", e)
		}
		fmt.Fprintln(w, "    }")
	}
	for _, m := range p.Memory {
		fmt.Fprintf(w, "\n%s  # memory %s has work waiting: %s; this apply finishes it%s\n", c.Bold, termtext.Printable(m.Address), termtext.Printable(m.Reason), c.Reset)
	}
	targetWarning(w, p, c)
	planWarnings(w, p, c)
	planNotes(w, p, c)
	fmt.Fprintf(w, "\n%s%s%s\n", c.Bold, p.Summary(), c.Reset)
}

func legend(a engine.Action) string {
	switch a {
	case engine.ActionCreate:
		return "create"
	case engine.ActionExecute:
		return "execute run"
	case engine.ActionUpdate:
		return "update in-place"
	case engine.ActionReplace:
		return "destroy and then create replacement"
	case engine.ActionRerun:
		return "re-run"
	case engine.ActionRestore:
		return "restore from snapshot"
	case engine.ActionImport:
		return "import an existing sandbox"
	case engine.ActionResume:
		return "resume run"
	case engine.ActionDelete:
		return "destroy"
	case engine.ActionForget:
		return "forget record (run or chat session)"
	}
	return string(a)
}

// quoteName renders name or name["key"] the way the block is written.
func quoteName(name string) string {
	if i := strings.IndexByte(name, '['); i >= 0 {
		return fmt.Sprintf("%q%s", name[:i], name[i:])
	}
	return fmt.Sprintf("%q", name)
}

func quoteValue(v string) string {
	if strings.HasPrefix(v, "(") {
		return termtext.Printable(v)
	}
	if strings.Contains(v, "\n") {
		lines := strings.Split(strings.TrimRight(v, "\n"), "\n")
		if len(lines) > 6 {
			lines = append(lines[:6], fmt.Sprintf("... (%d more lines)", len(lines)-6))
		}
		return "<<-EOT\n          " + termtext.Printable(strings.Join(lines, "\n          ")) + "\n        EOT"
	}
	if len(v) > 200 {
		v = v[:200] + "…"
	}
	return fmt.Sprintf("%q", v)
}

// planWarnings prints what the plan could not check but apply needs.
func planWarnings(w io.Writer, p *engine.Plan, c Colors) {
	for _, msg := range p.Warnings {
		fmt.Fprintf(w, "\n%sWarning:%s %s\n", c.Yellow+c.Bold, c.Reset, termtext.Printable(msg))
	}
}

// planNotes prints what the plan leaves as it is but a reviewer should
// know (a sandbox that lives in another working directory).
func planNotes(w io.Writer, p *engine.Plan, c Colors) {
	for _, n := range p.Notes {
		fmt.Fprintf(w, "\n%sNote:%s %s\n", c.Cyan+c.Bold, c.Reset, termtext.Printable(n.Message))
	}
}

// targetWarning is Terraform's warning for plans made with -target.
func targetWarning(w io.Writer, p *engine.Plan, c Colors) {
	if len(p.Excludes) > 0 {
		fmt.Fprintf(w, "\n%sWarning:%s Resource exclusion is in effect\n\n", c.Yellow+c.Bold, c.Reset)
		fmt.Fprintf(w, "You are creating a plan with the -exclude option: %s and everything that depends on them are left out, so the result of this plan may not represent all of the changes requested by the current configuration.\n", strings.Join(p.Excludes, ", "))
	}
	if len(p.Targets) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%sWarning:%s Resource targeting is in effect\n\n", c.Yellow+c.Bold, c.Reset)
	fmt.Fprintln(w, "You are creating a plan with the -target option, which means that the result of this plan may not represent all of the changes requested by the current configuration.")
	fmt.Fprintln(w, "\nThe -target option is not for routine use, and is provided only for exceptional situations such as recovering from errors or mistakes, or when agentctl specifically suggests to use it as part of an error message.")
}

// renderRefreshOnly prints a plan -refresh-only as terraform does: the
// objects changed outside agentctl, or that nothing was.
func renderRefreshOnly(w io.Writer, p *engine.Plan, c Colors) {
	if len(p.Drift) == 0 {
		fmt.Fprintf(w, "\n%sNo changes.%s Your sandboxes still match the state.\n\n", c.Green+c.Bold, c.Reset)
		fmt.Fprintln(w, "agentctl asked the providers about the sandboxes in the state and found no differences, so there is nothing to record.")
		targetWarning(w, p, c)
		return
	}
	fmt.Fprintf(w, "\n%sNote: Objects have changed outside of agentctl%s\n\n", c.Bold, c.Reset)
	fmt.Fprintln(w, "agentctl detected the following changes made outside of agentctl since the last \"agentctl apply\":")
	for _, d := range p.Drift {
		fmt.Fprintf(w, "\n%s  # %s has been %s%s (the state says %s)\n", c.Bold, d.Address, driftVerb(d.Actual), c.Reset, d.Recorded)
		fmt.Fprintf(w, "  # (%s)\n", termtext.Printable(d.Message))
	}
	targetWarning(w, p, c)
	fmt.Fprintln(w, "\nThis is a refresh-only plan, so agentctl will not take any actions to undo these: no sandbox is created, started or deleted and no run executes. If you were expecting these changes, apply this plan (agentctl apply -refresh-only) to record them in the state.")
	fmt.Fprintf(w, "\n%s%s%s\n", c.Bold, refreshSummary(p), c.Reset)
}

// driftVerb is what happened to a sandbox whose provider reports actual.
func driftVerb(actual string) string {
	switch actual {
	case "missing":
		return "deleted"
	case "running":
		return "started"
	}
	return actual
}

// refreshSummary is the last line of a refresh-only plan.
func refreshSummary(p *engine.Plan) string {
	return fmt.Sprintf("Plan: %d %s changed outside agentctl to record in the state.", len(p.Drift), plural(len(p.Drift), "sandbox", "sandboxes"))
}
