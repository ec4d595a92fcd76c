package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Hook is a hook block of an agent or run: a host command run on an event
// of the agent loop, given the event as JSON on its standard input.
type Hook struct {
	Event   string
	Command []string
	// Timeout bounds the command (DefaultHookTimeout when not set).
	Timeout   time.Duration
	DeclRange hcl.Range
}

// DefaultHookTimeout bounds a hook whose block sets no timeout.
const DefaultHookTimeout = 10 * time.Second

// HookEvents are the events a hook may name; run_end is a run's.
var HookEvents = []string{"agent_start", "agent_end", "tool_start", "tool_end", "handoff", "run_end"}

var hookSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "command", Required: true}, {Name: "timeout"}}}

// decodeHook decodes one hook block of an agent or run (owner), whose
// arguments see var, local and each (sc, each).
func (l *loader) decodeHook(b *hcl.Block, owner string, sc scope, each *eachVal) *Hook {
	h := &Hook{Event: b.Labels[0], Timeout: DefaultHookTimeout, DeclRange: b.DefRange}
	lrng := b.LabelRanges[0]
	switch {
	case !oneOf(h.Event, HookEvents...):
		l.errorf(lrng, "Unknown hook event", "A hook runs on one of %s, not %q.%s", quoteList(HookEvents), h.Event, suggest(h.Event, HookEvents))
		return nil
	case h.Event == "run_end" && owner == "agent":
		l.errorf(lrng, "Invalid hook event", "run_end is a run's event: put this hook in the run block.")
		return nil
	}
	content, diags := b.Body.Content(hookSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return nil
	}
	sc.where = "a hook"
	a := content.Attributes["command"]
	v, ok := l.eval(a.Expr, sc, each, nil)
	if !ok || !l.noSensitive(v, a.Expr.Range(), "A hook's command") {
		return nil
	}
	if h.Command, ok = l.toStringList(v, a.Expr.Range(), "command"); !ok {
		return nil
	}
	if len(h.Command) == 0 || h.Command[0] == "" {
		l.errorf(a.Expr.Range(), "Invalid hook command", "command is the program and its arguments, like [\"./audit.sh\", \"--strict\"]; it may not be empty.")
		return nil
	}
	if t, ok := content.Attributes["timeout"]; ok {
		tv, ok := l.eval(t.Expr, sc, each, nil)
		if !ok {
			return nil
		}
		d, ok := l.toDuration(tv, t.Expr.Range(), "timeout")
		if !ok {
			return nil
		}
		if d <= 0 {
			l.errorf(t.Expr.Range(), "Invalid hook timeout", "A hook's timeout must be more than zero, like \"10s\".")
			return nil
		}
		h.Timeout = d
	}
	return h
}

// HooksFor lists the hooks of event for a run's agent (or, agent "", the
// run's own): the agent's, then the run's, in the order they are written.
func (c *Config) HooksFor(ri *RunInstance, agent, event string) []*Hook {
	var out []*Hook
	if a := c.Agents[agent]; a != nil {
		for _, h := range a.Hooks {
			if h.Event == event {
				out = append(out, h)
			}
		}
	}
	if ri != nil {
		for _, h := range ri.Hooks {
			if h.Event == event {
				out = append(out, h)
			}
		}
	}
	return out
}
