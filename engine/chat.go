package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// A chat session (agentctl chat) is a conversation with one agent kept in
// the state as chat.NAME (state.Chat). Each line the user types is a
// turn: one agentloop run whose conversation starts from the transcript
// of the session's previous turns (Runner.Prior) and whose steps are
// checkpointed in a journal of its own, exactly like a run's. The state
// records the turn under way (Chat.Current, Chat.Input) before it starts,
// and the last completed turn's journal (Chat.Journal, whose transcript
// is the whole conversation) once it ends; the journal of the turn
// before is removed only then. A turn cut short (interrupt, crash) stays
// running in the state and the next session resumes it from its last
// checkpoint; a turn that fails is dropped, leaving the conversation as
// it was before it.

// ChatSession is an open chat session: its agents' sandboxes running and
// its agents built. Its methods write the state; the caller holds the
// state lock while one runs (agentctl chat takes it for each turn, and
// calls Refresh first with the state read under it).
type ChatSession struct {
	e      *Engine
	a      *applier
	addr   string
	agent  string
	agents map[string]*agentloop.Agent
	scrub  *sandbox.Scrubber
	// ri and ws are the session as a run (its agent) and its workspaces:
	// the MCP servers of its agents start for each turn.
	ri *config.RunInstance
	ws map[string]*sandbox.Workspace
	// Events receives the runtime events of each turn (scrubbed).
	Events func(agentloop.Event)

	mu      sync.Mutex
	offsets map[string]int // model turns of each agent in earlier turns
}

// ChatAddress is the state address of the chat session named session.
func ChatAddress(session string) string { return addrs.Chat{Name: session}.String() }

// OpenChat opens the chat session named session with agent: its record
// in st (created on the first turn), the sandboxes of the agent and of
// those it reaches (created if they are not in the state, started if
// stopped, restored as apply does), and the agents built as for a run.
// Calls that need approval are asked of e.Approver; without one they are
// refused for the turn.
func (e *Engine) OpenChat(ctx context.Context, st *state.State, session, agent string) (*ChatSession, error) {
	addr := ChatAddress(session)
	if e.Config.Agents[agent] == nil {
		return nil, fmt.Errorf("agent.%s is not declared in the configuration; chat with one of its agents (agentctl validate lists problems)", agent)
	}
	if c := st.Chats[addr]; c != nil && c.Agent != agent {
		return nil, fmt.Errorf("%s is a conversation with agent.%s, not agent.%s: continue it with agentctl chat -session %s agent.%s, or choose another -session name", addr, c.Agent, agent, session, c.Agent)
	}
	s := &ChatSession{e: e, addr: addr, agent: agent, scrub: e.scrubber(), ri: &config.RunInstance{Addr: addr, Agent: agent}, offsets: map[string]int{}}
	if err := s.open(ctx, st); err != nil {
		return nil, err
	}
	return s, nil
}

// open makes st the session's state, opens the session's sandboxes in it
// and builds its agents on them.
func (s *ChatSession) open(ctx context.Context, st *state.State) error {
	e := s.e
	a := &applier{e: e, p: &Plan{}, st: st, sbs: map[string]sandbox.Sandbox{}, used: map[string]bool{}, snapMu: map[string]*sync.Mutex{}}
	if st.AgentctlVersion != e.Version {
		st.AgentctlVersion = e.Version
	}
	if st.Serial == 0 {
		// As apply: the lineage providers label sandboxes with is written
		// before the first create.
		if err := a.update(func(*state.State) {}); err != nil {
			return err
		}
	}
	s.a = a
	workspaces := map[string]*sandbox.Workspace{}
	for _, sbAddr := range e.Config.RunSandboxes(s.ri) {
		if e.Config.SandboxInstances[sbAddr] == nil {
			return fmt.Errorf("%s: %s is not declared", s.addr, sbAddr)
		}
		if st.Sandboxes[sbAddr] == nil {
			if err := a.createSandbox(ctx, sbAddr, false); err != nil {
				return fmt.Errorf("%s: %w", s.addr, err)
			}
		}
		sb, err := a.ensureRunning(ctx, sbAddr)
		if err != nil {
			return fmt.Errorf("%s: %w", s.addr, err)
		}
		workspaces[sbAddr] = e.workspace(sbAddr, sb)
		workspaces[sbAddr].URLs = maps.Clone(st.Sandboxes[sbAddr].URLs)
	}
	s.ws = workspaces
	// A chat turn runs its commands to completion: no sessions outlive it.
	agents, err := e.buildAgents(ctx, s.ri, workspaces, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", s.addr, err)
	}
	for name, ra := range agents {
		m, err := e.provs().chatModel(e, e.Config.Agents[name], s.addr)
		if err != nil {
			return err
		}
		if m == nil {
			m = ra.Model
		}
		ra.Model = &sessionModel{Model: m, s: s}
	}
	s.agents = agents
	s.setOffsets(st.Chats[s.addr])
	return nil
}

// setOffsets numbers the agents' model turns after those of c's turns.
func (s *ChatSession) setOffsets(c *state.Chat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.offsets)
	if c != nil {
		maps.Copy(s.offsets, c.AgentTurns)
	}
}

// chatModel returns the model of agent a in the chat session at addr when
// its provider's settings differ for that session (registry.ChatScoper),
// built once per session; nil when they do not.
func (ps *providerSet) chatModel(e *Engine, a *config.Agent, addr string) (model.Model, error) {
	provAddr := e.Config.ModelProvider(a)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, t, err := e.provider(provAddr)
	if err != nil {
		return nil, fmt.Errorf("agent %q: %w", a.Name, err)
	}
	cs, ok := p.Settings.(registry.ChatScoper)
	if !ok {
		return nil, nil
	}
	settings, scoped := cs.ForChat(chatName(addr))
	if !scoped {
		return nil, nil
	}
	key := provAddr + " " + addr
	if m, ok := ps.models[key]; ok {
		return m, nil
	}
	env, err := ps.modelEnv(e, provAddr)
	if err != nil {
		return nil, err
	}
	m, err := t.NewModel(context.Background(), settings, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", provAddr, err)
	}
	ps.models[key] = m
	return m, nil
}

// chatName is the session name of a chat address.
func chatName(addr string) string {
	c, err := addrs.ParseChat(addr)
	if err != nil {
		return addr
	}
	return c.Name
}

// sessionModel numbers each agent's model turns across the session's
// turns (model.Request.AgentTurn), as if the session were one run: a
// scripted model replays its replies in order across turns.
type sessionModel struct {
	model.Model
	s *ChatSession
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
func (s *ChatSession) Address() string { return s.addr }

// record returns the session's record, nil before its first turn.
func (s *ChatSession) record() *state.Chat {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	if c := s.a.st.Chats[s.addr]; c != nil {
		cp := *c
		return &cp
	}
	return nil
}

// Record returns a copy of the session's record in the state, nil before
// its first turn.
func (s *ChatSession) Record() *state.Chat { return s.record() }

// Interrupted returns the input of a turn an earlier session did not
// finish (it was interrupted or its process died), which Resume carries
// on; ok is false when there is none.
func (s *ChatSession) Interrupted() (input string, ok bool) {
	c := s.record()
	if c == nil || c.Status != state.ChatRunning {
		return "", false
	}
	return c.Input, true
}

// ChatTurnError is a turn that failed: it was dropped and the
// conversation is as it was before it.
type ChatTurnError struct {
	Session string
	Err     error
}

func (e *ChatTurnError) Error() string {
	return fmt.Sprintf("%s: the turn failed and was dropped (the conversation is as it was before it): %v", e.Session, e.Err)
}

func (e *ChatTurnError) Unwrap() error { return e.Err }

// Turn runs one turn: input is the user's line. It returns the agent's
// reply. A turn that fails is a *ChatTurnError; a turn interrupted
// (ctx canceled, Engine.Interrupt) stays in the state for the next
// session to resume, and its error wraps agentloop.ErrInterrupted or
// context.Canceled.
func (s *ChatSession) Turn(ctx context.Context, input string) (*agentloop.Result, error) {
	if _, ok := s.Interrupted(); ok {
		return nil, fmt.Errorf("%s: a turn is still under way; resume it first", s.addr)
	}
	return s.run(ctx, input, false)
}

// Resume carries on the turn an earlier session did not finish from its
// last checkpoint.
func (s *ChatSession) Resume(ctx context.Context) (*agentloop.Result, error) {
	if _, ok := s.Interrupted(); !ok {
		return nil, fmt.Errorf("%s: there is no turn to resume", s.addr)
	}
	return s.run(ctx, "", true)
}

// journalRun describes a chat journal as readJournal reads a run's.
func (s *ChatSession) journalRun(rel, status string, steps int) *state.Run {
	return &state.Run{Address: s.addr, Status: status, Journal: rel, Steps: steps}
}

// transcript is the conversation of the completed turns.
func (s *ChatSession) transcript(c *state.Chat) ([]model.Item, error) {
	if c == nil || c.Journal == "" {
		return nil, nil
	}
	steps, err := s.e.readJournal(s.journalRun(c.Journal, RunCompleted, 0))
	if err != nil {
		return nil, chatJournalError(s.addr, err)
	}
	items, err := agentloop.Transcript(steps)
	if err != nil {
		return nil, fmt.Errorf("%s: its journal %s: %w", s.addr, c.Journal, err)
	}
	return items, nil
}

// chatJournalError says what a lost chat journal means.
func chatJournalError(addr string, err error) error {
	var lost *JournalLostError
	if errors.As(err, &lost) {
		return fmt.Errorf("%s: its journal %s %s, so the conversation is lost; /reset (or agentctl destroy) starts it over", addr, lost.Path, lost.problem())
	}
	return err
}

func (s *ChatSession) run(ctx context.Context, input string, resume bool) (*agentloop.Result, error) {
	e := s.e
	now := time.Now().UTC()
	c := s.record()
	if c == nil {
		c = &state.Chat{Address: s.addr, Agent: s.agent, Status: state.ChatIdle, CreatedAt: now}
	}
	prior, err := s.transcript(c)
	if err != nil {
		return nil, err
	}
	var history []agentloop.Step
	cur := c.Current
	if resume {
		if history, err = e.readJournal(s.journalRun(cur, RunRunning, c.Steps)); err != nil {
			return nil, chatJournalError(s.addr, err)
		}
		input = c.Input
	} else {
		cur = state.ScopedJournalName(s.a.lineage(), fmt.Sprintf("%s.turn%d", s.addr, c.Turns+1))
		// A file left by a turn that never reached the state is stale.
		if err := e.State.RemoveJournal(cur); err != nil {
			return nil, fmt.Errorf("%s: clearing old journal: %w", s.addr, err)
		}
	}
	journal, err := e.State.OpenJournal(cur)
	if err != nil {
		return nil, fmt.Errorf("%s: opening journal: %w", s.addr, err)
	}
	defer journal.Close()
	if !resume {
		if err := s.a.update(func(st *state.State) {
			if st.Chats == nil {
				st.Chats = map[string]*state.Chat{}
			}
			r := *c
			r.Status, r.Current, r.Input, r.Steps, r.Approvals, r.UpdatedAt = state.ChatRunning, cur, input, 0, nil, now
			r.Sandboxes = sortedKeys(s.workspaces())
			st.Chats[s.addr] = &r
		}, state.ChatRef(s.addr)); err != nil {
			return nil, err
		}
	}
	start := c.LastAgent
	if start == "" || s.agents[start] == nil {
		start = s.agent
	}
	turnCounts := map[string]int{}
	var countMu sync.Mutex // checkpoints of concurrent calls arrive at once
	for _, st := range history {
		if st.Kind == agentloop.StepModel && st.Response != nil {
			turnCounts[st.Agent]++
		}
	}
	events := newRunEvents(s.scrub, func(ev agentloop.Event) {
		if s.Events != nil {
			s.Events(ev)
		}
	})
	agents := s.agents
	if len(runMCPServers(e.Config, s.ri)) > 0 {
		// The turn's MCP servers start now and stop when it ends; the
		// session's agents get their tools for this turn only.
		mcps, err := e.startMCP(ctx, s.a.lineage(), s.ri, s.ws, resume)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.addr, err)
		}
		defer mcps.close()
		agents = make(map[string]*agentloop.Agent, len(s.agents))
		for name, ra := range s.agents {
			c := *ra
			c.Tools = slices.Clone(ra.Tools)
			c.Approvals = maps.Clone(ra.Approvals)
			agents[name] = &c
		}
		if err := mcps.addTools(e.Config, agents); err != nil {
			return nil, fmt.Errorf("%s: %w", s.addr, err)
		}
	}
	runner := &agentloop.Runner{
		Agents:    agents,
		Interrupt: e.Interrupt,
		Tracer:    e.tracer(),
		Prior:     prior,
		Checkpoint: func(_ context.Context, st agentloop.Step) error {
			if st.Kind == agentloop.StepModel && st.Response != nil {
				countMu.Lock()
				turnCounts[st.Agent]++
				countMu.Unlock()
			}
			return journal.Append(scrubStep(s.scrub, st))
		},
		Events:    events.Event,
		Decisions: chatDecisions(c, resume),
		Redact:    func(args string) string { return scrubJSONString(s.scrub, args) },
		Ask:       s.asker(),
	}
	res, runErr := runner.Run(ctx, start, input, history)
	events.Flush()
	switch {
	case runErr == nil:
	case errors.Is(runErr, agentloop.ErrInterrupted) || errors.Is(runErr, context.Canceled):
		if err := s.a.update(func(st *state.State) { st.Chats[s.addr].Steps = journal.Len() }, state.ChatRef(s.addr)); err != nil {
			return nil, errors.Join(runErr, err)
		}
		return res, fmt.Errorf("%s: the turn was interrupted; it is checkpointed, and the next agentctl chat -session %s agent.%s resumes it: %w", s.addr, chatName(s.addr), s.agent, runErr)
	default:
		// Dropped: the conversation stays as it was before the turn.
		if err := s.a.update(func(st *state.State) {
			r := st.Chats[s.addr]
			r.Status, r.Current, r.Input, r.Steps, r.Approvals, r.UpdatedAt = state.ChatIdle, "", "", 0, nil, time.Now().UTC()
		}, state.ChatRef(s.addr)); err != nil {
			return nil, errors.Join(runErr, err)
		}
		journal.Close()
		if err := e.State.RemoveJournal(cur); err != nil {
			return nil, errors.Join(runErr, err)
		}
		return res, &ChatTurnError{Session: s.addr, Err: e.scrubErr(runErr)}
	}
	old := c.Journal
	if err := s.a.update(func(st *state.State) {
		r := st.Chats[s.addr]
		r.Status, r.Journal, r.Current, r.Input, r.Steps, r.Approvals = state.ChatIdle, cur, "", "", 0, nil
		r.Turns++
		r.LastAgent = res.Agent
		r.Usage.Add(res.Usage)
		if r.AgentTurns == nil {
			r.AgentTurns = map[string]int{}
		}
		for a, n := range turnCounts {
			r.AgentTurns[a] += n
		}
		r.UpdatedAt = time.Now().UTC()
		s.mu.Lock()
		maps.Copy(s.offsets, r.AgentTurns)
		s.mu.Unlock()
	}, state.ChatRef(s.addr)); err != nil {
		return nil, err
	}
	if old != "" && old != cur {
		if err := e.State.RemoveJournal(old); err != nil {
			return res, fmt.Errorf("%s: removing the previous turn's journal: %w", s.addr, err)
		}
	}
	return res, nil
}

// workspaces are the session's sandboxes, by address.
func (s *ChatSession) workspaces() map[string]bool {
	out := map[string]bool{}
	for _, sb := range s.e.Config.RunSandboxes(&config.RunInstance{Agent: s.agent}) {
		out[sb] = true
	}
	return out
}

// chatDecisions are the decisions recorded for the turn being resumed.
func chatDecisions(c *state.Chat, resume bool) map[agentloop.DecisionKey]agentloop.Decision {
	if !resume {
		return nil
	}
	return decisions(&state.Run{Approvals: c.Approvals}, true)
}

// NoReviewerReason is what the model reads for a call that needs approval
// when no one can be asked (standard input is not a terminal).
const NoReviewerReason = "no reviewer could be asked (agentctl chat's standard input is not a terminal), so the call was refused for this turn"

// asker asks e.Approver about a call that needs approval and records the
// decision in the session's record. A chat has no later apply to decide
// a deferred call, so a call not approved (no reviewer, an empty answer)
// is refused for this turn and the model is told why.
func (s *ChatSession) asker() func(context.Context, agentloop.PendingCall) (agentloop.Decision, bool) {
	var mu sync.Mutex
	always := map[string]Answer{} // tool → the session's standing answer
	return func(ctx context.Context, pc agentloop.PendingCall) (agentloop.Decision, bool) {
		call := *pendingApproval(pc, s.scrub, time.Now().UTC())
		mu.Lock()
		ans, ok := always[pc.Tool]
		mu.Unlock()
		switch {
		case ok:
			ans.Always, ans.Reason = false, "always "+ans.Decision+" for this session"
		case s.e.Approver == nil:
			ans = Answer{Decision: state.ApprovalRejected, Reason: NoReviewerReason}
		default:
			ans = s.e.Approver.Approve(ctx, s.addr, call)
			if ans.Decision != state.ApprovalApproved && ans.Decision != state.ApprovalRejected {
				ans = Answer{Decision: state.ApprovalRejected, By: ans.By, Reason: "not approved in the chat"}
			}
		}
		if ans.Always {
			mu.Lock()
			always[pc.Tool] = ans
			mu.Unlock()
		}
		call.Decision, call.DecidedBy, call.DecidedAt, call.Reason = ans.Decision, ans.By, time.Now().UTC(), ans.Reason
		// Recorded so that a resumed turn does not ask again; the decision
		// stands for this turn even if the state cannot be written.
		_ = s.a.update(func(st *state.State) {
			if r := st.Chats[s.addr]; r != nil {
				r.Approvals = recordDecision(r.Approvals, pc, &call)
			}
		}, state.ChatRef(s.addr))
		return agentloop.Decision{Approved: ans.Decision == state.ApprovalApproved, Reason: ans.Reason}, true
	}
}

// ChatHistory is the conversation of a chat session's completed turns
// (agentctl show chat.NAME), scrubbed.
func (e *Engine) ChatHistory(c *state.Chat) ([]model.Item, error) {
	s := &ChatSession{e: e, addr: c.Address, scrub: e.scrubber()}
	items, err := s.transcript(c)
	if err != nil {
		return nil, err
	}
	for i := range items {
		items[i] = scrubItem(s.scrub, items[i])
	}
	return items, nil
}

// History is the conversation of the session's completed turns, scrubbed
// with the configuration's sensitive values.
func (s *ChatSession) History() ([]model.Item, error) {
	items, err := s.transcript(s.record())
	if err != nil {
		return nil, err
	}
	for i := range items {
		items[i] = scrubItem(s.scrub, items[i])
	}
	return items, nil
}

// Reset starts the conversation over: the record keeps its agent and
// sandboxes (their workspaces are untouched), and the journals go.
func (s *ChatSession) Reset() error {
	c := s.record()
	if c == nil {
		return nil
	}
	if err := s.a.update(func(st *state.State) {
		st.Chats[s.addr] = &state.Chat{Address: s.addr, Agent: s.agent, Status: state.ChatIdle, Sandboxes: c.Sandboxes, CreatedAt: c.CreatedAt, UpdatedAt: time.Now().UTC()}
	}, state.ChatRef(s.addr)); err != nil {
		return err
	}
	s.mu.Lock()
	clear(s.offsets)
	s.mu.Unlock()
	return removeChatJournals(s.e, c)
}

// removeChatJournals removes the journals a chat record refers to.
func removeChatJournals(e *Engine, c *state.Chat) error {
	var errs []error
	for _, rel := range []string{c.Journal, c.Current} {
		if rel == "" {
			continue
		}
		if err := e.State.RemoveJournal(rel); err != nil {
			errs = append(errs, fmt.Errorf("%s: removing its journal: %w", c.Address, err))
		}
	}
	return errors.Join(errs...)
}

// forgetChat removes a chat session's record from the state, then its
// journals (destroy).
func (a *applier) forgetChat(addr string) error {
	var c *state.Chat
	if err := a.update(func(st *state.State) {
		c = st.Chats[addr]
		delete(st.Chats, addr)
	}, state.ChatRef(addr)); err != nil {
		return err
	}
	if c == nil {
		return nil
	}
	return removeChatJournals(a.e, c)
}
