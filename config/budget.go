package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

var budgetSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "max_tokens"}, {Name: "max_tool_calls"}, {Name: "max_duration"},
}}

// decodeBudget decodes a budget block of a run or an agent (where names
// it for messages: "run", "agent"); each is the run instance's for_each
// value, nil for an agent or a run without for_each. A limit left out is
// 0, no limit.
func (l *loader) decodeBudget(b *hcl.Block, where string, each *eachVal) *Budget {
	content, diags := b.Body.Content(budgetSchema)
	l.diags = append(l.diags, diags...)
	bu := &Budget{DeclRange: b.DefRange}
	attrs := content.Attributes
	if len(attrs) == 0 && !diags.HasErrors() {
		l.errorf(b.DefRange, "Empty budget", "A %s's budget block sets at least one of max_tokens, max_tool_calls and max_duration.", where)
	}
	sc := scope{each: each != nil, where: "a " + where + "'s budget"}
	value := func(name string) (hcl.Range, bool) {
		a, ok := attrs[name]
		if !ok {
			return hcl.Range{}, false
		}
		return a.Expr.Range(), true
	}
	if r, ok := value("max_tokens"); ok {
		if v, good := l.eval(attrs["max_tokens"].Expr, sc, each, nil); good {
			if n, good := l.toInt64(v, r, "max_tokens"); good {
				if n < 1 {
					l.errorf(r, "Invalid max_tokens", "max_tokens must be at least 1, got %d. Leave it out for no token limit.", n)
				}
				bu.MaxTokens = n
			}
		}
	}
	if r, ok := value("max_tool_calls"); ok {
		if v, good := l.eval(attrs["max_tool_calls"].Expr, sc, each, nil); good {
			if n, good := l.toInt(v, r, "max_tool_calls"); good {
				if n < 1 {
					l.errorf(r, "Invalid max_tool_calls", "max_tool_calls must be at least 1, got %d. Leave it out for no limit on tool calls.", n)
				}
				bu.MaxToolCalls = n
			}
		}
	}
	if r, ok := value("max_duration"); ok {
		if v, good := l.eval(attrs["max_duration"].Expr, sc, each, nil); good {
			if d, good := l.toDuration(v, r, "max_duration"); good {
				if d < time.Second {
					l.errorf(r, "Invalid max_duration", "max_duration must be at least 1s, got %s. Leave it out for no time limit.", d)
				}
				bu.MaxDuration = d
			}
		}
	}
	return bu
}
