package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentctl/agentctl/state"
)

// Sandboxes that live elsewhere: a local sandbox belongs to the working
// directory and machine that made it (the local provider records both
// in its session state). Working directories that share the state
// through a backend see it as living elsewhere (sandbox.ElsewhereError),
// not as gone: plan leaves it there and says so, unless this apply needs
// it (a run on it executes or resumes, or its memory has work waiting),
// in which case it is restored here from its latest snapshot and this
// working directory becomes its owner, recorded in the state. The one
// that made it then sees it as living elsewhere in turn.

// placeElsewhere decides, for each sandbox planned as no-op because it
// lives elsewhere, whether this apply needs it here: then it is planned
// as a restore; otherwise a plan note says where it lives.
func (e *Engine) placeElsewhere(ctx context.Context, st *state.State, p *Plan, live map[string]liveSandbox) {
	for _, c := range p.Changes {
		where := live[c.Address].elsewhere
		if c.Kind != KindSandbox || c.Action != ActionNoop || where == "" {
			continue
		}
		needs := e.needsSandbox(st, p, c.Address)
		if len(needs) == 0 {
			msg := fmt.Sprintf("%s lives in %s; it is restored here only when a run here needs it", c.Address, where)
			if len(c.Reasons) > 0 {
				msg += " (" + strings.Join(c.Reasons, "; ") + ": the change is made where it lives, or here when it is restored here)"
			}
			c.Reasons = nil
			p.Notes = append(p.Notes, Note{Address: c.Address, Message: msg})
			continue
		}
		prev := st.Sandboxes[c.Address]
		from := "from its latest snapshot"
		if prev.Snapshot == "" {
			from = "from its manifest, since it has no snapshot yet (the files in its workspace there are not brought over)"
		}
		c.Action = ActionRestore
		c.Reasons = []string{fmt.Sprintf("it lives in %s and %s here: it is restored here %s, and this working directory becomes its owner",
			where, strings.Join(needs, " and "), from)}
		if err := e.snapshotFileError(ctx, c.Address, prev); err != nil {
			c.Reasons = append(c.Reasons, "apply will fail: "+err.Error())
		}
	}
}

// needsSandbox says what in plan p needs the sandbox at addr: the runs
// on it that execute or resume, and memory work waiting in it.
func (e *Engine) needsSandbox(st *state.State, p *Plan, addr string) []string {
	var runs []string
	for _, c := range p.Changes {
		if c.Kind != KindRun || !executes(c.Action) {
			continue
		}
		if ri := e.Config.RunInstances[c.Address]; ri != nil && slices.Contains(e.Config.RunSandboxes(ri), addr) {
			runs = append(runs, c.Address)
		}
	}
	var needs []string
	switch len(runs) {
	case 0:
	case 1:
		needs = append(needs, runs[0]+" runs")
	default:
		needs = append(needs, strings.Join(runs, ", ")+" run")
	}
	for _, m := range p.Memory {
		if mem := st.Memories[m.Address]; mem != nil && mem.Sandbox == addr {
			needs = append(needs, "memory "+m.Address+" has work waiting")
		}
	}
	return needs
}

// leftElsewhere adds to the reasons of a sandbox's delete or replace,
// when the sandbox lives elsewhere, that its files there are not
// removed from here.
func leftElsewhere(reasons []string, l liveSandbox) []string {
	if l.elsewhere == "" {
		return reasons
	}
	return append(reasons, "it lives in "+l.elsewhere+", whose files are not removed from here: remove them there")
}
