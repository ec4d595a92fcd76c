package config

import (
	"slices"

	"github.com/hashicorp/hcl/v2"
)

var handoffSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "agent", Required: true}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "input_filter"}},
}

var inputFilterSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "remove_tool_calls"}, {Name: "keep_last"}}}

// decodeHandoff reads a handoff block: a handoff to agent, like an entry
// of handoffs, with what of the conversation that agent is given
// (input_filter).
func (l *loader) decodeHandoff(ag *Agent, b *hcl.Block) {
	content, diags := b.Body.Content(handoffSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	expr := content.Attributes["agent"].Expr
	target, ok := l.namedRef(expr, "agent", "agent")
	if !ok {
		return
	}
	if slices.Contains(ag.Handoffs, target) {
		l.errorf(expr.Range(), "Duplicate handoff", "Agent %q already hands off to agent.%s (in handoffs or another handoff block): list each agent once.", ag.Name, target)
		return
	}
	ag.Handoffs = append(ag.Handoffs, target)
	var filter *hcl.Block
	for _, fb := range content.Blocks {
		if filter != nil {
			l.errorf(fb.DefRange, "Duplicate input_filter block", "A handoff may have one input_filter; the first is at %s.", rangeString(filter.DefRange))
			return
		}
		filter = fb
	}
	if filter == nil {
		return
	}
	if f, ok := l.decodeInputFilter(filter); ok {
		if ag.HandoffFilters == nil {
			ag.HandoffFilters = map[string]HandoffFilter{}
		}
		ag.HandoffFilters[target] = f
	}
}

// decodeInputFilter reads a handoff's input_filter block.
func (l *loader) decodeInputFilter(b *hcl.Block) (HandoffFilter, bool) {
	var f HandoffFilter
	content, diags := b.Body.Content(inputFilterSchema)
	l.diags = append(l.diags, diags...)
	sc := scope{where: "a handoff's input_filter"}
	if v, r, ok := l.settingAttr(content.Attributes, "remove_tool_calls", sc, nil, "An input filter setting"); ok {
		f.RemoveToolCalls, _ = l.toBool(v, r, "remove_tool_calls")
	}
	if v, r, ok := l.settingAttr(content.Attributes, "keep_last", sc, nil, "An input filter setting"); ok {
		if n, ok := l.toInt(v, r, "keep_last"); ok {
			if n < 1 {
				l.errorf(r, "Invalid keep_last", "keep_last is how many of the last conversation items the agent handed to is given; it must be at least 1, got %d.", n)
				return f, false
			}
			f.KeepLast = n
		}
	}
	if !f.RemoveToolCalls && f.KeepLast == 0 && !diags.HasErrors() {
		l.errorf(b.DefRange, "Empty input_filter", "This input_filter filters nothing: set remove_tool_calls = true, keep_last = N, or both; or remove the block to hand off the whole conversation.")
		return f, false
	}
	return f, true
}
