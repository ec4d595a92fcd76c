// Package scripted is a deterministic, offline model provider: the replies
// of each agent are declared in the configuration and given in order
// within a run. It makes demos, tests and CI reproducible without keys.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/model"
)

// Reply is one scripted model reply: text, tool calls, or both.
type Reply struct {
	Text  string
	Calls []Call
}

// Call is one scripted tool call.
type Call struct {
	Name      string
	Arguments json.RawMessage
}

// Model answers from scripts, keyed by agent name.
type Model struct {
	scripts map[string][]Reply
}

// New returns a scripted model.
func New(scripts map[string][]Reply) *Model {
	return &Model{scripts: scripts}
}

// Respond gives the agent's reply number req.AgentTurn. Running out of
// replies is an error that fails the run.
func (m *Model) Respond(ctx context.Context, req *model.Request, sink func(model.Event)) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	replies, ok := m.scripts[req.Agent]
	if !ok {
		return nil, fmt.Errorf("scripted provider has no script for agent %q: add a script %q { reply { ... } } block to the scripted provider", req.Agent, req.Agent)
	}
	if req.AgentTurn >= len(replies) {
		return nil, fmt.Errorf("scripted provider ran out of replies for agent %q: its script has %d and turn %d needs one more; add reply blocks to script %q", req.Agent, len(replies), req.AgentTurn+1, req.Agent)
	}
	r := replies[req.AgentTurn]
	resp := &model.Response{ID: fmt.Sprintf("scripted_%s_%d", req.Agent, req.AgentTurn)}
	if r.Text != "" {
		if sink != nil {
			for _, w := range strings.SplitAfter(r.Text, " ") {
				sink(model.Event{Type: model.EventTextDelta, Delta: w})
			}
		}
		resp.Output = append(resp.Output, model.Item{Type: model.ItemMessage, Role: "assistant", Text: r.Text})
	}
	for i, c := range r.Calls {
		args := plainJSON(c.Arguments)
		id := fmt.Sprintf("call_%s_%d_%d", req.Agent, req.AgentTurn, i)
		if sink != nil {
			sink(model.Event{Type: model.EventToolCallStart, Name: c.Name, CallID: id})
		}
		resp.Output = append(resp.Output, model.Item{Type: model.ItemFunctionCall, CallID: id, Name: c.Name, Arguments: args})
	}
	resp.Usage = model.Usage{InputTokens: estimateTokens(req), OutputTokens: int64(len(r.Text)+len(resp.Output)*8) / 4}
	return resp, nil
}

// estimateTokens approximates input tokens (4 bytes a token) so usage
// accounting has realistic figures offline.
func estimateTokens(req *model.Request) int64 {
	n := len(req.Instructions)
	for _, it := range req.Input {
		n += len(it.Text) + len(it.Arguments) + len(it.Output)
	}
	return int64(n) / 4
}

// plainJSON re-encodes arguments without HTML escaping, so a script's
// "a > b" reaches the tool and the transcript as written ("{}" when empty).
func plainJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
