package engine

import (
	"context"
	"maps"
	"slices"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// Drift is a difference between the state and a sandbox's provider that
// a refresh found: a sandbox stopped or deleted behind agentctl's back.
type Drift struct {
	Address string `json:"address"`
	// Recorded is the status the state records; Actual the one the
	// provider reports: stopped or missing.
	Recorded string `json:"recorded"`
	Actual   string `json:"actual"`
	// Message says what applying the drift records in the state.
	Message string `json:"message"`
}

// planRefreshOnly is plan -refresh-only: it refreshes the sandboxes of st
// (those targets select, when any) and lists how they differ from what
// st records. Nothing else is planned.
func (e *Engine) planRefreshOnly(ctx context.Context, st *state.State, p *Plan) (*Plan, error) {
	live, err := e.refresh(ctx, st)
	if err != nil {
		return nil, err
	}
	for _, addr := range slices.Sorted(maps.Keys(live)) {
		if !selected(addr, p.Targets) || len(p.Excludes) > 0 && selected(addr, p.Excludes) {
			continue
		}
		l, recorded := live[addr], st.Sandboxes[addr]
		switch {
		case l.elsewhere != "":
			// Another working directory's: not drift.
		case l.missing():
			msg := "deleted outside agentctl: it is removed from the state; the next apply creates it anew"
			if recorded.Snapshot != "" {
				msg = "deleted outside agentctl: the state records it as deleted and keeps its snapshot, from which a run that needs it restores it"
			}
			p.Drift = append(p.Drift, Drift{Address: addr, Recorded: recorded.Status, Actual: string(sandbox.StatusMissing), Message: msg})
		case recorded.Status == statusRunning && l.status == sandbox.StatusStopped:
			// Only a stop is drift: a stopped sandbox is started by the
			// apply that needs it, and providers that keep no process
			// (local) report the status they were opened with.
			p.Drift = append(p.Drift, Drift{Address: addr, Recorded: recorded.Status, Actual: string(l.status),
				Message: "stopped outside agentctl: the state records it as stopped; the next run that uses it starts it"})
		}
	}
	return p, nil
}

// selected reports whether -target addresses select addr (all do when
// there are none).
func selected(addr string, targets []string) bool {
	if len(targets) == 0 {
		return true
	}
	a, err := addrs.ParseInstance(addr)
	for _, t := range targets {
		if t == addr {
			return true
		}
		if ta, terr := addrs.ParseInstance(t); terr == nil && err == nil && ta.Selects(a) {
			return true
		}
	}
	return false
}

// applyRefreshOnly records a refresh-only plan's drift in st: a missing
// sandbox is forgotten, or recorded as deleted when it has a snapshot to
// restore; a stopped one is recorded as stopped.
func (e *Engine) applyRefreshOnly(ctx context.Context, st *state.State, p *Plan) error {
	for _, d := range p.Drift {
		ss := st.Sandboxes[d.Address]
		if ss == nil {
			continue
		}
		msg := ""
		switch {
		case d.Actual != string(sandbox.StatusMissing):
			ss.Status = d.Actual
			msg = "recorded as " + d.Actual
		case ss.Snapshot != "":
			ss.Status = statusDeleted
			msg = "recorded as deleted; its snapshot is kept"
		default:
			delete(st.Sandboxes, d.Address)
			msg = "removed from the state"
		}
		e.emit(Event{Type: EventApplyProgress, Address: d.Address, Message: msg})
	}
	if len(p.Drift) == 0 {
		return nil
	}
	return e.State.Write(ctx, st)
}
