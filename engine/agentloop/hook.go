package agentloop

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentctl/agentctl/model"
)

// StepHook records that a hook ran (Step.Hook), so a resumed run does not
// run it again: a tool_start hook that blocked a call blocks it again with
// the same message, without running the command.
const StepHook StepKind = "hook"

// HookRecord is what the journal keeps of an event's hooks having run.
type HookRecord struct {
	// Key names the occurrence of the event within the run (hookKey).
	Key   string `json:"key"`
	Event string `json:"event"`
	// Blocked and Message: a tool_start hook refused the call with
	// Message as the call's output.
	Blocked bool   `json:"blocked,omitempty"`
	Message string `json:"message,omitempty"`
	// Failed says what went wrong with a hook whose failure does not
	// stop the run (reported as a warning when it happened).
	Failed string `json:"failed,omitempty"`
}

// HookEvent is an event of the turn loop, as a hook command receives it
// on its standard input (as JSON).
type HookEvent struct {
	Event string `json:"event"`
	Agent string `json:"agent,omitempty"`
	// Path is the nested conversation ("" for the run's own).
	Path      string          `json:"path,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Output is a tool_end's call output or an agent_end's final output.
	Output string `json:"output,omitempty"`
	// ToAgent is the agent a handoff transfers to.
	ToAgent string `json:"to_agent,omitempty"`
	// Input is an agent_start's input text.
	Input string `json:"input,omitempty"`
}

// HookResult is what an event's hooks decided: Block (tool_start only)
// refuses the call with Message as its output; Failed reports hooks that
// failed without stopping the run.
type HookResult struct {
	// Ran says some hook ran for the event (none is configured
	// otherwise): only then is its run journaled.
	Ran     bool
	Block   bool
	Message string
	Failed  string
}

// hook runs the hooks of ev (Runner.Hook) unless the journal says they
// ran for this occurrence (key), and checkpoints that they ran.
func (f *frame) hook(ctx context.Context, ev HookEvent, key string) (HookResult, error) {
	st := f.st
	if st.r.Hook == nil {
		return HookResult{}, nil
	}
	key = ev.Event + "/" + f.path + "/" + key
	st.mu.Lock()
	rec, done := st.hooksRan[key]
	st.mu.Unlock()
	if done {
		return HookResult{Block: rec.Blocked, Message: rec.Message}, nil
	}
	ev.Path = f.path
	res, err := st.r.Hook(ctx, ev)
	if err != nil {
		return res, fmt.Errorf("hook %s: %w", ev.Event, err)
	}
	if !res.Ran {
		return res, nil
	}
	rec = &HookRecord{Key: key, Event: ev.Event, Blocked: res.Block, Message: res.Message, Failed: res.Failed}
	if err := st.checkpoint(ctx, Step{Kind: StepHook, Path: f.path, Agent: ev.Agent, Hook: rec}); err != nil {
		return res, err
	}
	st.mu.Lock()
	st.hooksRan[key] = rec
	st.mu.Unlock()
	return res, nil
}

// recordHooks notes the hooks a resumed run's history says ran.
func (st *runState) recordHooks(history []Step) {
	st.hooksRan = map[string]*HookRecord{}
	for _, s := range history {
		if s.Kind == StepHook && s.Hook != nil {
			st.hooksRan[s.Hook.Key] = s.Hook
		}
	}
}

// toolStart runs the tool_start hooks of a call; blocked, the call does
// not run and text is its output.
func (f *frame) toolStart(ctx context.Context, a *Agent, call model.Item) (blocked bool, text string, err error) {
	res, err := f.hook(ctx, HookEvent{Event: "tool_start", Agent: a.Name, Tool: call.Name, CallID: call.CallID, Arguments: rawArgs(call.Arguments)}, call.CallID)
	return res.Block, res.Message, err
}

// rawArgs is a call's arguments as JSON, or as a JSON string when they
// are not valid JSON.
func rawArgs(args string) json.RawMessage {
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}

// handoffHooks runs the handoff hooks of agent from and the agent_start
// hooks of agent to, once the handoff is taken.
func (f *frame) handoffHooks(ctx context.Context, from, to string) error {
	at := fmt.Sprint(f.turns)
	if _, err := f.hook(ctx, HookEvent{Event: "handoff", Agent: from, ToAgent: to}, from+"/"+at); err != nil {
		return err
	}
	_, err := f.hook(ctx, HookEvent{Event: "agent_start", Agent: to}, to+"/"+at)
	return err
}

// agentEnd runs the agent_end hooks of the agent that gave the final
// output.
func (f *frame) agentEnd(ctx context.Context, output json.RawMessage) error {
	text := string(output)
	var s string
	if json.Unmarshal(output, &s) == nil {
		text = s
	}
	_, err := f.hook(ctx, HookEvent{Event: "agent_end", Agent: f.agent, Output: text}, f.agent+"/"+fmt.Sprint(f.turns))
	return err
}
