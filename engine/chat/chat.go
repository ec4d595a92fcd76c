// Package chat is agentctl chat: a conversation with one agent, kept in
// the state as chat.NAME (state.Chat).
//
// Each line the user types is a turn: one turn loop of an engine.Session
// whose conversation starts from the transcript of the session's
// previous turns and whose steps are checkpointed in a journal of its
// own, exactly like a run's. The state records the turn under way
// (Chat.Current, Chat.Input) before it starts, and the last completed
// turn's journal (Chat.Journal, whose transcript is the whole
// conversation) once it ends; the journal of the turn before is removed
// only then. A turn cut short (interrupt, crash) stays running in the
// state and the next session resumes it from its last checkpoint; a turn
// that fails is dropped, leaving the conversation as it was before it.
package chat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/state"
)

// Address is the state address of the chat session named session.
func Address(session string) string { return addrs.Chat{Name: session}.String() }

// Session is an open chat session: its agents' sandboxes running and its
// agents built (engine.Session). Its methods write the state; the caller
// holds the state lock while one runs (agentctl chat takes it for each
// turn, and calls Refresh first with the state read under it).
type Session struct {
	e     *engine.Engine
	sess  *engine.Session
	addr  addrs.Chat
	key   string // addr.String()
	agent string
	// Events receives the runtime events of each turn (scrubbed).
	Events func(agentloop.Event)

	mu      sync.Mutex
	offsets map[string]int // model turns of each agent in earlier turns
}

// Open opens the chat session named session with agent: its record in st
// (created on the first turn), the sandboxes of the agent and of those it
// reaches (created if they are not in the state, started if stopped,
// restored as apply does), and the agents built as for a run. Calls that
// need approval are asked of e.Approver; without one they are refused for
// the turn.
func Open(ctx context.Context, e *engine.Engine, st *state.State, session, agent string) (*Session, error) {
	addr := addrs.Chat{Name: session}
	key := addr.String()
	if e.Config.Agents[agent] == nil {
		return nil, fmt.Errorf("agent.%s is not declared in the configuration; chat with one of its agents (agentctl validate lists problems)", agent)
	}
	if c := st.Chats[key]; c != nil && c.Agent != agent {
		return nil, fmt.Errorf("%s is a conversation with agent.%s, not agent.%s: continue it with agentctl chat -session %s agent.%s, or choose another -session name", key, c.Agent, agent, session, c.Agent)
	}
	s := &Session{e: e, addr: addr, key: key, agent: agent, offsets: map[string]int{}}
	wrap := func(m model.Model) model.Model { return &sessionModel{Model: m, s: s} }
	sess, err := e.OpenSession(ctx, st, addr, agent, wrap)
	if err != nil {
		return nil, err
	}
	s.sess = sess
	s.setOffsets(st.Chats[key])
	return s, nil
}

// setOffsets numbers the agents' model turns after those of c's turns.
func (s *Session) setOffsets(c *state.Chat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.offsets)
	if c != nil {
		maps.Copy(s.offsets, c.AgentTurns)
	}
}

// sessionModel numbers each agent's model turns across the session's
// turns (model.Request.AgentTurn), as if the session were one run: a
// scripted model replays its replies in order across turns.
type sessionModel struct {
	model.Model
	s *Session
}

func (m *sessionModel) Respond(ctx context.Context, req *model.Request, sink func(model.Event)) (*model.Response, error) {
	r := *req
	m.s.mu.Lock()
	r.AgentTurn += m.s.offsets[req.Agent]
	m.s.mu.Unlock()
	return m.Model.Respond(ctx, &r, sink)
}

// CompactsServerSide forwards the wrapped model's answer.
func (m *sessionModel) CompactsServerSide() bool { return model.CompactsServerSide(m.Model) }

// Address is the session's address, chat.NAME.
func (s *Session) Address() string { return s.key }

// Record returns a copy of the session's record in the state, nil before
// its first turn.
func (s *Session) Record() *state.Chat {
	var c *state.Chat
	s.sess.View(func(st *state.State) {
		if r := st.Chats[s.key]; r != nil {
			cp := *r
			c = &cp
		}
	})
	return c
}

// Interrupted returns the input of a turn an earlier session did not
// finish (it was interrupted or its process died), which Resume carries
// on; ok is false when there is none.
func (s *Session) Interrupted() (input string, ok bool) {
	c := s.Record()
	if c == nil || c.Status != state.ChatRunning {
		return "", false
	}
	return c.Input, true
}

// TurnError is a turn that failed: it was dropped and the conversation is
// as it was before it.
type TurnError struct {
	Session string
	Err     error
}

func (e *TurnError) Error() string {
	if t, ok := agentloop.IsGuardrailTripped(e.Err); ok {
		return fmt.Sprintf("%s: guardrail %q stopped the turn on %s (agent %q): %s; the turn was dropped (the conversation is as it was before it)",
			e.Session, t.Verdict.Name, tripWhat(t), t.Agent, t.Verdict.Message)
	}
	return fmt.Sprintf("%s: the turn failed and was dropped (the conversation is as it was before it): %v", e.Session, e.Err)
}

// tripWhat says what a tripped guardrail checked, in a chat turn's words.
func tripWhat(t *agentloop.GuardrailTrippedError) string {
	switch t.Verdict.On {
	case agentloop.GuardInput:
		return "its input"
	case agentloop.GuardOutput:
		return "its answer"
	case agentloop.GuardToolInput:
		return "the arguments of a call of " + t.Tool
	}
	return "the output of a call of " + t.Tool
}

func (e *TurnError) Unwrap() error { return e.Err }

// Turn runs one turn: input is the user's line. It returns the agent's
// reply. A turn that fails is a *TurnError; a turn interrupted (ctx
// canceled, Engine.Interrupt) stays in the state for the next session to
// resume, and its error wraps agentloop.ErrInterrupted or
// context.Canceled.
func (s *Session) Turn(ctx context.Context, input string) (*agentloop.Result, error) {
	if _, ok := s.Interrupted(); ok {
		return nil, fmt.Errorf("%s: a turn is still under way; resume it first", s.key)
	}
	return s.run(ctx, input, false)
}

// Resume carries on the turn an earlier session did not finish from its
// last checkpoint.
func (s *Session) Resume(ctx context.Context) (*agentloop.Result, error) {
	if _, ok := s.Interrupted(); !ok {
		return nil, fmt.Errorf("%s: there is no turn to resume", s.key)
	}
	return s.run(ctx, "", true)
}

// journalRun describes a chat journal as the engine reads a run's.
func journalRun(key, rel, status string, steps int) *state.Run {
	return &state.Run{Address: key, Status: status, Journal: rel, Steps: steps}
}

// transcript is the conversation of the completed turns of c, the record
// of the session at key, its steps read with read (engine.Steps, or
// engine.Transcript to scrub them again).
func transcript(ctx context.Context, key string, c *state.Chat, read func(context.Context, *state.Run) ([]agentloop.Step, error)) ([]model.Item, error) {
	if c == nil || c.Journal == "" {
		return nil, nil
	}
	steps, err := read(ctx, journalRun(key, c.Journal, engine.RunCompleted, 0))
	if err != nil {
		return nil, journalError(key, err)
	}
	items, err := agentloop.Transcript(steps)
	if err != nil {
		return nil, fmt.Errorf("%s: its journal %s: %w", key, c.Journal, err)
	}
	return items, nil
}

// journalError says what a lost chat journal means.
func journalError(addr string, err error) error {
	var lost *engine.JournalLostError
	if errors.As(err, &lost) {
		return fmt.Errorf("%s: its journal %s %s, so the conversation is lost; /reset (or agentctl destroy) starts it over", addr, lost.Path, lost.Problem())
	}
	return err
}

// History is the conversation of a chat session's completed turns
// (agentctl show chat.NAME), scrubbed with the configuration's sensitive
// values.
func History(ctx context.Context, e *engine.Engine, c *state.Chat) ([]model.Item, error) {
	if c == nil {
		return nil, nil
	}
	return transcript(ctx, c.Address, c, e.Transcript)
}

// History is the conversation of the session's completed turns, scrubbed
// with the configuration's sensitive values.
func (s *Session) History(ctx context.Context) ([]model.Item, error) {
	return transcript(ctx, s.key, s.Record(), s.e.Transcript)
}
