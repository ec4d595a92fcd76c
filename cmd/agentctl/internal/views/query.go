package views

import (
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/internal/termtext"
)

// Query shows agentctl query: what each provider holds, and the orphans
// -reap deleted.
type Query interface {
	// Result shows what the providers hold; reaping says -reap follows.
	Result(r *engine.QueryResult, reaping bool) error
	// Reaped reports one orphan deleted.
	Reaped(f engine.Found)
	// Done ends the output: the orphans deleted (nil without -reap).
	Done(reaped []engine.Found) error
}

// NewQuery returns the query view of viewType.
func NewQuery(viewType arguments.ViewType, view *View) Query {
	if viewType == arguments.ViewJSON {
		return &queryJSON{View: view}
	}
	return queryHuman{view}
}

type queryHuman struct{ *View }

func (v queryHuman) Result(r *engine.QueryResult, reaping bool) error {
	w, c := v.Stdout, v.Colors
	counts := map[string]int{}
	prov := ""
	for _, f := range r.Sandboxes {
		if f.Provider != prov {
			prov = f.Provider
			fmt.Fprintf(w, "%s%s%s (%s):\n", c.Bold, f.Provider, c.Reset, f.Kind)
		}
		counts[f.Status]++
		color := ""
		switch f.Status {
		case engine.FoundOrphan:
			color = c.Red
		case engine.FoundForeign:
			color = c.Yellow
		}
		fmt.Fprintf(w, "  %s%-8s%s %s\n", color, f.Status, c.Reset, describeFound(f))
	}
	for _, u := range r.Unlisted {
		fmt.Fprintf(w, "%s%s%s: not listed: %s\n", c.Bold, u.Provider, c.Reset, termtext.Printable(u.Reason))
	}
	if len(r.Sandboxes) > 0 || len(r.Unlisted) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d %s: %d managed, %d %s, %d foreign.\n", len(r.Sandboxes), plural(len(r.Sandboxes), "sandbox", "sandboxes"),
		counts[engine.FoundManaged], counts[engine.FoundOrphan], plural(counts[engine.FoundOrphan], "orphan", "orphans"), counts[engine.FoundForeign])
	if n := counts[engine.FoundOrphan]; n > 0 && !reaping {
		fmt.Fprintf(w, "An orphan was created for this configuration but no state records it (an apply stopped while creating it, or its record was removed); agentctl query -reap deletes %s.\n", plural(n, "it", "them"))
	}
	return nil
}

// describeFound is one sandbox's line: its id, name, address and
// lineage, as printable text.
func describeFound(f engine.Found) string {
	parts := []string{f.ID}
	if f.Name != "" && f.Name != f.ID && !strings.HasSuffix(f.ID, "/"+f.Name) {
		parts = append(parts, "("+f.Name+")")
	}
	if f.Address != "" {
		parts = append(parts, f.Address)
	}
	if f.State != "" {
		parts = append(parts, f.State)
	}
	if f.Status != engine.FoundManaged && f.Lineage != "" {
		parts = append(parts, "lineage "+f.Lineage)
	}
	return termtext.Printable(strings.Join(parts, " "))
}

func (v queryHuman) Reaped(f engine.Found) {
	fmt.Fprintf(v.Stdout, "Deleted %s\n", describeFound(f))
}

func (v queryHuman) Done(reaped []engine.Found) error {
	if reaped != nil {
		fmt.Fprintf(v.Stdout, "\nReaped %d %s.\n", len(reaped), plural(len(reaped), "orphan", "orphans"))
	}
	return nil
}

type queryJSON struct {
	*View
	result *engine.QueryResult
}

func (v *queryJSON) Result(r *engine.QueryResult, _ bool) error {
	v.result = r
	return nil
}

func (v *queryJSON) Reaped(engine.Found) {}

func (v *queryJSON) Done(reaped []engine.Found) error {
	// "reaped" is there with -reap only, empty when nothing was deleted.
	out := struct {
		*engine.QueryResult
		Reaped *[]engine.Found `json:"reaped,omitempty"`
	}{QueryResult: v.result}
	if reaped != nil {
		out.Reaped = &reaped
	}
	return writeJSON(v.Stdout, out)
}
