package agentloop

import (
	"fmt"
	"time"
)

// EventType names a runtime event shown to the user as it happens.
type EventType string

const (
	EventTextDelta     EventType = "text_delta"
	EventToolCall      EventType = "tool_call"
	EventToolResult    EventType = "tool_result"
	EventHandoff       EventType = "handoff"
	EventAgentToolCall EventType = "agent_tool_call"
	EventAgentToolDone EventType = "agent_tool_result"
	EventTurn          EventType = "turn"
	EventFinal         EventType = "final_output"
	// EventCompaction: the conversation is being compacted client-side
	// (Text says why and how much).
	EventCompaction EventType = "compaction"
	// EventPolicyError: a tool call's approval policy failed, so the call
	// was refused; Text is the policy's located error, for the operator
	// (the model reads PolicyRefusal).
	EventPolicyError EventType = "policy_error"
	// EventRetry: a model call failed and is retried; Text says when and
	// why ("retrying in 12s after 429", RetryText).
	EventRetry EventType = "retry"
	// EventHostedToolCall: the model's service ran one of its hosted
	// tools (Name is its call's type, web_search_call; Text says what it
	// did), announced as the response streams. Nothing runs here.
	EventHostedToolCall EventType = "hosted_tool_call"
	// EventGuardrail: a guardrail tripped (Name is the guardrail, Text
	// its message); the run stops.
	EventGuardrail EventType = "guardrail_tripped"
)

// RetryText is the notice of a model call retried after delay because of
// after ("429", "a timeout"): "retrying in 12s after 429".
func RetryText(delay time.Duration, after string) string {
	switch {
	case delay >= time.Second:
		delay = delay.Round(100 * time.Millisecond)
	default:
		delay = delay.Round(time.Millisecond)
	}
	return fmt.Sprintf("retrying in %s after %s", delay, after)
}

// Event is one runtime event. Path is the nested conversation's path as
// in Step.
type Event struct {
	Type   EventType `json:"type"`
	Path   string    `json:"path,omitempty"`
	Agent  string    `json:"agent"`
	Turn   int       `json:"turn,omitempty"`
	Name   string    `json:"name,omitempty"`
	CallID string    `json:"call_id,omitempty"`
	// Arguments of a tool call.
	Arguments string `json:"arguments,omitempty"`
	// Text is a text delta, a tool output preview, the handoff target or
	// the final output.
	Text    string `json:"text,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// previewLimit bounds tool output previews in events.
const previewLimit = 400

func preview(s string) string {
	if len(s) <= previewLimit {
		return s
	}
	cut := previewLimit
	for cut > 0 && s[cut]&0xC0 == 0x80 { // keep UTF-8 whole
		cut--
	}
	return s[:cut] + "…"
}
