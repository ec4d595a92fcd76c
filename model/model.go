// Package model defines the interface between the agent runtime and model
// providers (openai, scripted), and the provider-neutral conversation items
// that the runtime checkpoints.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ItemType is the kind of one conversation item; the names follow the
// Responses API.
type ItemType string

const (
	ItemMessage            ItemType = "message"
	ItemFunctionCall       ItemType = "function_call"
	ItemFunctionCallOutput ItemType = "function_call_output"
	ItemReasoning          ItemType = "reasoning"
	ItemCompaction         ItemType = "compaction"
	// ItemHostedToolCall is a call of a tool the model's service ran
	// itself (an OpenAI hosted tool: web search, file search, code
	// interpreter, image generation). It is recorded and shown, never
	// executed by agentctl: Name is the service's item type
	// (web_search_call), CallID its id, Text a one-line account of what
	// it did, Raw the service's own encoding, replayed to it.
	ItemHostedToolCall ItemType = "hosted_tool_call"
)

// Image is an image returned to the model (view_image).
type Image struct {
	MediaType string `json:"media_type"` // image/png, image/jpeg, image/gif, image/webp
	Data      []byte `json:"data"`
	Detail    string `json:"detail,omitempty"` // auto, low, high
}

// Item is one element of a conversation. Items are JSON-serializable and
// are what the runtime checkpoints, so they never carry credentials.
type Item struct {
	Type ItemType `json:"type"`
	// Role is user, assistant, system or developer for messages.
	Role string `json:"role,omitempty"`
	// Text is a message's text.
	Text string `json:"text,omitempty"`
	// CallID, Name and Arguments describe a function call; CallID also
	// links a function_call_output to its call.
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	// Output is a function call's text output; Images are attached to it.
	Output string  `json:"output,omitempty"`
	Images []Image `json:"images,omitempty"`
	// Agent is the agent that produced the item (assistant items).
	Agent string `json:"agent,omitempty"`
	// Raw is the provider's own encoding of an item the runtime does not
	// interpret (reasoning, compaction), replayed to the same provider.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// Tool is a function tool offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema object
	Strict      bool            `json:"strict,omitempty"`
}

// HostedTool is a tool the model's service runs itself (an OpenAI hosted
// tool). Type names it (web_search, file_search, code_interpreter,
// image_generation); Config is the tool's definition exactly as the
// service's API takes it in a request's tools, "type" included. The
// provider that decoded it (registry.Type.DecodeHostedTool) built Config.
type HostedTool struct {
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config"`
}

// Settings are model settings from an agent's settings block. A provider
// passes each set one to its API under the API's own name; the
// configuration refuses a setting the agent's provider's API does not
// accept.
type Settings struct {
	ReasoningEffort   string   `json:"reasoning_effort,omitempty"`
	ReasoningSummary  string   `json:"reasoning_summary,omitempty"`
	Verbosity         string   `json:"verbosity,omitempty"`
	Temperature       *float64 `json:"temperature,omitempty"`
	TopP              *float64 `json:"top_p,omitempty"`
	MaxOutputTokens   int64    `json:"max_output_tokens,omitempty"`
	ParallelToolCalls *bool    `json:"parallel_tool_calls,omitempty"`
	// ToolChoice is auto, none, required, the name of a function tool,
	// or the type of one of the request's hosted tools.
	ToolChoice       string   `json:"tool_choice,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	// Truncation is auto or disabled.
	Truncation string `json:"truncation,omitempty"`
	// Store asks the service to keep the response (nil: the provider's
	// default).
	Store    *bool             `json:"store,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// PromptCacheRetention is in_memory or 24h; PromptCacheMode
	// (implicit, explicit) and PromptCacheTTL (30m, 12h) are the
	// request's prompt_cache_options.
	PromptCacheRetention string `json:"prompt_cache_retention,omitempty"`
	PromptCacheMode      string `json:"prompt_cache_mode,omitempty"`
	PromptCacheTTL       string `json:"prompt_cache_ttl,omitempty"`
	// Include lists additional output data to include in the response
	// (the Responses API's include values, like
	// web_search_call.action.sources).
	Include []string `json:"include,omitempty"`
}

// Compaction asks for the context to be compacted when the input grows
// past Threshold tokens: server-side by a model that implements
// ServerCompactor and says so (the Responses context_management setting),
// otherwise by the agent loop, which summarizes older turns with the
// model (client-side).
type Compaction struct {
	Threshold int64 `json:"threshold,omitempty"`
}

// DefaultCompactThreshold is the client-side compaction threshold, in
// tokens, when none is configured: the Agents SDK's static policy.
const DefaultCompactThreshold = 240_000

// ServerCompactor is implemented by a model that can compact the context
// itself when a request carries Compaction.
type ServerCompactor interface {
	CompactsServerSide() bool
}

// CompactsServerSide reports whether m compacts server-side.
func CompactsServerSide(m Model) bool {
	sc, ok := m.(ServerCompactor)
	return ok && sc.CompactsServerSide()
}

// Request is one model turn.
type Request struct {
	// Agent is the name of the agent taking this turn.
	Agent string
	// AgentTurn counts this agent's earlier model turns in the same run
	// (0 for its first); the scripted provider picks its reply by it.
	AgentTurn    int
	Model        string
	Instructions string
	Input        []Item
	Tools        []Tool
	// HostedTools are tools the model's service runs itself; their calls
	// come back as ItemHostedToolCall items.
	HostedTools []HostedTool
	// OutputSchema, when set, asks for structured output (strict JSON
	// schema); OutputSchemaName names it.
	OutputSchema     json.RawMessage
	OutputSchemaName string
	Settings         Settings
	Compaction       *Compaction
}

// Usage is token usage of one turn.
type Usage struct {
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	CachedTokens    int64 `json:"cached_tokens,omitempty"`
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.CachedTokens += u2.CachedTokens
	u.ReasoningTokens += u2.ReasoningTokens
}

// Response is the complete result of one turn.
type Response struct {
	ID     string `json:"id,omitempty"`
	Output []Item `json:"output"`
	Usage  Usage  `json:"usage"`
	// Model is the model that answered when it is not the agent's own:
	// one of its model_fallback models, after the models before it were
	// unavailable (Unavailable). Empty when the agent's model answered.
	Model string `json:"model,omitempty"`
	// Fallbacks say why each model tried before Model did not answer, in
	// order ("gpt-5: HTTP 503 Service Unavailable ..."); empty when the
	// agent's model answered.
	Fallbacks []string `json:"fallbacks,omitempty"`
}

// EventType names a streaming event.
type EventType string

const (
	EventTextDelta     EventType = "text_delta"
	EventToolCallStart EventType = "tool_call"
	EventReasoning     EventType = "reasoning_delta"
	// EventRetry: an attempt failed and the provider waits Delay before
	// the next; After says what failed ("429", "a timeout"). What the
	// failed attempt streamed may be streamed again.
	EventRetry EventType = "retry"
	// EventHostedToolCall: the service ran one of its hosted tools; Name
	// is the call's item type (web_search_call), CallID its id, Delta
	// what it did (as ItemHostedToolCall's Text).
	EventHostedToolCall EventType = "hosted_tool_call"
)

// Event is a streaming event emitted while a response is produced.
type Event struct {
	Type  EventType
	Delta string
	// Name and CallID are set for tool call events.
	Name   string
	CallID string
	// Delay and After are set for retry events.
	Delay time.Duration
	After string
}

// Model is one configured model provider.
type Model interface {
	// Respond runs one turn, calling sink (if non-nil) with streaming
	// events as they arrive, and returns the complete response. Errors
	// that survive the provider's own retries are returned wrapped.
	Respond(ctx context.Context, req *Request, sink func(Event)) (*Response, error)
}

// Unavailable is implemented by errors of a model call after which the
// same request may be made to another model (an agent's model_fallback):
// the model is not there, overloaded, or rate limited after the
// provider's own retries. ModelUnavailable reports whether this error is
// such a one.
type Unavailable interface {
	ModelUnavailable() bool
}

// IsUnavailable reports whether err, or an error it wraps, says the model
// was unavailable (Unavailable).
func IsUnavailable(err error) bool {
	var u Unavailable
	return errors.As(err, &u) && u.ModelUnavailable()
}

// FunctionCalls returns the function call items of a response in order.
func (r *Response) FunctionCalls() []Item {
	var calls []Item
	for _, it := range r.Output {
		if it.Type == ItemFunctionCall {
			calls = append(calls, it)
		}
	}
	return calls
}

// Text returns the concatenated text of the response's assistant messages.
func (r *Response) Text() string {
	var s string
	for _, it := range r.Output {
		if it.Type == ItemMessage && it.Role == "assistant" {
			s += it.Text
		}
	}
	return s
}
