package agentloop

import (
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/model"
)

// InputFilter is what of the conversation an agent handed to is given,
// as a handoff's input_filter says: the Agents SDK's remove_all_tools,
// and a cut to the last items.
type InputFilter struct {
	// RemoveToolCalls drops every function call and its output (the
	// handoff's own included), every hosted tool call and every
	// reasoning item, as the SDK's remove_all_tools does.
	RemoveToolCalls bool `json:"remove_tool_calls,omitempty"`
	// KeepLast keeps the last KeepLast items (after RemoveToolCalls),
	// and, before them, the call of any output they keep, which the
	// model's API refuses without it; 0 keeps all.
	KeepLast int `json:"keep_last,omitempty"`
}

// String says what the filter does, for transcripts and traces.
func (fl *InputFilter) String() string {
	var parts []string
	if fl.RemoveToolCalls {
		parts = append(parts, "tool calls removed")
	}
	if fl.KeepLast > 0 {
		parts = append(parts, fmt.Sprintf("last %d items kept", fl.KeepLast))
	}
	return strings.Join(parts, ", ")
}

// handoffFilter is the input filter of a's handoff to target, nil for
// none (or no handoff).
func handoffFilter(a *Agent, target string) *InputFilter {
	if target == "" {
		return nil
	}
	for _, h := range a.Handoffs {
		if h.Agent == target {
			return h.InputFilter
		}
	}
	return nil
}

// apply returns the conversation conv filtered; conv is not modified.
func (fl *InputFilter) apply(conv []model.Item) []model.Item {
	out := make([]model.Item, 0, len(conv))
	for _, it := range conv {
		if fl.RemoveToolCalls && toolItem(it) {
			continue
		}
		out = append(out, it)
	}
	if fl.KeepLast <= 0 || len(out) <= fl.KeepLast {
		return out
	}
	calls := map[string]int{}
	for i, it := range out {
		if it.Type == model.ItemFunctionCall {
			calls[it.CallID] = i
		}
	}
	start := len(out) - fl.KeepLast
	for moved := true; moved; {
		moved = false
		for _, it := range out[start:] {
			if j, ok := calls[it.CallID]; ok && it.Type == model.ItemFunctionCallOutput && j < start {
				start, moved = j, true
				break
			}
		}
	}
	return out[start:]
}

// toolItem reports whether it belongs to a tool call (or is reasoning,
// which the model's API refuses without the item that followed it).
func toolItem(it model.Item) bool {
	switch it.Type {
	case model.ItemFunctionCall, model.ItemFunctionCallOutput, model.ItemHostedToolCall, model.ItemReasoning:
		return true
	}
	return false
}
