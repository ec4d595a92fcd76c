package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// A Session is one agent at work outside a plan, as a conversation of
// agentctl chat has it (engine/chat): the sandboxes that agent and the
// agents it reaches use, running (created, started or restored as apply
// does), and its agents built on them. Its methods read and write the
// state it was opened on, or last refreshed with; the caller holds the
// state lock while it calls them.
type Session struct {
	e     *Engine
	addr  addrs.Chat
	key   string // addr.String(): the key of the session's record in the state
	ri    *config.RunInstance
	wrap  func(model.Model) model.Model
	scrub *sandbox.Scrubber

	a      *applier
	ws     map[string]*sandbox.Workspace
	agents map[string]*agentloop.Agent
}

// OpenSession opens agent's session at addr on st: the sandboxes of the
// agent and of those it reaches, created if they are not in the state,
// started if stopped, restored as apply does; and the agents built as for
// a run, each with its model for the session (registry.ChatScoper)
// wrapped by wrap when it is set.
func (e *Engine) OpenSession(ctx context.Context, st *state.State, addr addrs.Chat, agent string, wrap func(model.Model) model.Model) (*Session, error) {
	key := addr.String()
	s := &Session{e: e, addr: addr, key: key, ri: &config.RunInstance{Addr: key, Agent: agent}, wrap: wrap, scrub: e.scrubber()}
	if err := s.open(ctx, st); err != nil {
		return nil, err
	}
	return s, nil
}

// open makes st the session's state, opens the session's sandboxes in it
// and builds its agents on them.
func (s *Session) open(ctx context.Context, st *state.State) error {
	e := s.e
	a := &applier{e: e, p: &Plan{}, st: st, sbs: map[string]sandbox.Sandbox{}, used: map[string]bool{}, snapMu: map[string]*sync.Mutex{}}
	if st.AgentctlVersion != e.Version {
		st.AgentctlVersion = e.Version
	}
	if st.Serial == 0 {
		// As apply: the lineage providers label sandboxes with is written
		// before the first create.
		if err := a.update(ctx, func(*state.State) {}); err != nil {
			return err
		}
	}
	s.a = a
	workspaces := map[string]*sandbox.Workspace{}
	for _, sbAddr := range e.Config.RunSandboxes(s.ri) {
		if e.Config.SandboxInstances[sbAddr] == nil {
			return fmt.Errorf("%s: %s is not declared", s.key, sbAddr)
		}
		if st.Sandboxes[sbAddr] == nil {
			if err := a.createSandbox(ctx, sbAddr, false); err != nil {
				return fmt.Errorf("%s: %w", s.key, err)
			}
		}
		sb, err := a.ensureRunning(ctx, sbAddr)
		if err != nil {
			return fmt.Errorf("%s: %w", s.key, err)
		}
		workspaces[sbAddr] = e.workspace(sbAddr, sb)
		workspaces[sbAddr].URLs = maps.Clone(st.Sandboxes[sbAddr].URLs)
	}
	s.ws = workspaces
	// A session's turn runs its commands to completion: no sessions
	// outlive it.
	agents, err := e.buildAgents(ctx, s.ri, workspaces, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", s.key, err)
	}
	for name, ra := range agents {
		m, err := e.provs().chatModel(e, e.Config.Agents[name], s.addr)
		if err != nil {
			return err
		}
		if m == nil {
			m = ra.Model
		}
		if s.wrap != nil {
			m = s.wrap(m)
		}
		ra.Model = m
	}
	s.agents = agents
	return nil
}

// Agents are the session's agents, by name.
func (s *Session) Agents() map[string]*agentloop.Agent { return s.agents }

// Workspaces are the session's sandboxes' workspaces, by address.
func (s *Session) Workspaces() map[string]*sandbox.Workspace { return s.ws }

// View calls fn with the session's state, which fn neither changes nor
// keeps.
func (s *Session) View(fn func(st *state.State)) {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	fn(s.a.st)
}

// Update changes the session's state with fn and records the change of
// the objects refs name durably.
func (s *Session) Update(ctx context.Context, fn func(st *state.State), refs ...state.Ref) error {
	return s.a.update(ctx, fn, refs...)
}

// Refresh makes st, the state just read under the lock, the session's
// state. A sandbox of the session that another command removed, replaced,
// stopped or left half restored in st is opened again (and the agents
// built again on it); the notices say which.
func (s *Session) Refresh(ctx context.Context, st *state.State) ([]string, error) {
	s.a.mu.Lock()
	old := s.a.st
	s.a.mu.Unlock()
	moved := s.sandboxChanges(old, st)
	if len(moved) == 0 {
		s.a.mu.Lock()
		s.a.st = st
		s.a.mu.Unlock()
		return nil, nil
	}
	s.closeSandboxes()
	return moved, s.open(ctx, st)
}

// sandboxChanges says which of the session's sandboxes another command
// removed, replaced, stopped or left half restored in cur since the
// session opened them in old: they are opened again.
func (s *Session) sandboxChanges(old, cur *state.State) []string {
	var out []string
	for _, addr := range slices.Sorted(maps.Keys(s.ws)) {
		o, c := old.Sandboxes[addr], cur.Sandboxes[addr]
		var what, then string
		switch {
		case c == nil:
			what, then = "was removed from the state", "it is created again"
		case c.Status == statusDeleted:
			what, then = "was deleted", "it is created again"
		case o == nil || c.Session.ID != o.Session.ID:
			what, then = "was replaced", "the session uses the new one"
		case c.RestorePending != nil:
			what, then = "was left half restored", "it is restored again"
		case c.Status != statusRunning:
			what, then = "was stopped", "it is started again"
		default:
			continue
		}
		out = append(out, fmt.Sprintf("%s %s by another agentctl command since this session's last turn: %s.", addr, what, then))
	}
	return out
}

// closeSandboxes ends what the session's sandbox handles hold in this
// process (a local sandbox's init) before they are opened again.
func (s *Session) closeSandboxes() {
	s.a.mu.Lock()
	sbs := slices.Collect(maps.Values(s.a.sbs))
	s.a.mu.Unlock()
	for _, sb := range sbs {
		if c, ok := sb.(io.Closer); ok {
			c.Close()
		}
	}
}

// A Turn is one turn loop of a Session: its conversation starts from
// Prior and History (the steps of an interrupted turn it carries on),
// goes on from Input, and every step is checkpointed in Journal.
type Turn struct {
	// Agent is the agent the turn starts with.
	Agent   string
	Input   string
	Prior   []model.Item
	History []agentloop.Step
	// Resume says the turn carries on an interrupted one: Approvals are
	// the decisions recorded on it, and its MCP servers' logs are
	// appended to.
	Resume    bool
	Approvals []*state.Approval
	Journal   state.JournalWriter
	// OnStep, when set, is called with each step before it is
	// checkpointed (the steps of concurrent calls arrive at once).
	OnStep func(agentloop.Step)
	// Events, when set, receives the turn's runtime events, scrubbed.
	Events func(agentloop.Event)
	// Ask decides a call that needs approval; call is its record, its
	// arguments scrubbed. The decision is recorded on the session's record
	// in the state (state.Chat.Approvals) before the call runs.
	Ask func(ctx context.Context, tool string, call state.Approval) Answer
}

// RunTurn runs the turn loop of t with the session's agents, and the
// tools of its MCP servers, started for the turn and stopped when it
// ends. err is a failure before the loop started (the turn did not run);
// loopErr is the loop's own error, its message scrubbed.
func (s *Session) RunTurn(ctx context.Context, t Turn) (res *agentloop.Result, loopErr, err error) {
	e := s.e
	agents := s.agents
	if len(runMCPServers(e.Config, s.ri)) > 0 {
		// The turn's MCP servers start now and stop when it ends; the
		// session's agents get their tools for this turn only.
		mcps, err := e.startMCP(ctx, s.a.lineage(), s.ri, s.ws, t.Resume)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.key, err)
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
			return nil, nil, fmt.Errorf("%s: %w", s.key, err)
		}
	}
	events := newRunEvents(s.scrub, func(ev agentloop.Event) {
		if t.Events != nil {
			t.Events(ev)
		}
	})
	runner := &agentloop.Runner{
		Agents:    agents,
		Interrupt: e.Interrupt,
		Tracer:    e.tracer(),
		Prior:     t.Prior,
		Checkpoint: func(_ context.Context, st agentloop.Step) error {
			if t.OnStep != nil {
				t.OnStep(st)
			}
			return t.Journal.Append(scrubStep(s.scrub, st))
		},
		Events:    events.Event,
		Decisions: decisions(&state.Run{Approvals: t.Approvals}, t.Resume),
		Redact:    func(args string) string { return scrubJSONString(s.scrub, args) },
		Ask:       s.asker(t.Ask),
		Hook: (&hookRunner{cfg: e.Config, run: s.key, scrub: s.scrub, tracer: e.tracer(), warn: func(msg string) {
			e.emit(Event{Type: EventApplyProgress, Message: "Warning: " + msg})
		}}).runHooks,
	}
	res, loopErr = runner.Run(ctx, t.Agent, t.Input, t.History)
	events.Flush()
	return res, e.scrubErr(loopErr), nil
}

// asker is a turn's Runner.Ask: ask decides each call, and the decision
// is recorded on the session's record.
func (s *Session) asker(ask func(context.Context, string, state.Approval) Answer) func(context.Context, agentloop.PendingCall) (agentloop.Decision, bool) {
	if ask == nil {
		return nil
	}
	return func(ctx context.Context, pc agentloop.PendingCall) (agentloop.Decision, bool) {
		call := *pendingApproval(pc, s.scrub, time.Now().UTC())
		ans := ask(ctx, pc.Tool, call)
		call.Decision, call.DecidedBy, call.DecidedAt, call.Reason = ans.Decision, ans.By, time.Now().UTC(), ans.Reason
		// Recorded so that a resumed turn does not ask again; the decision
		// stands for this turn even if the state cannot be written.
		_ = s.Update(ctx, func(st *state.State) {
			if r := st.Chats[s.key]; r != nil {
				r.Approvals = recordDecision(r.Approvals, pc, &call)
			}
		}, state.ChatRef(s.key))
		return agentloop.Decision{Approved: ans.Decision == state.ApprovalApproved, Reason: ans.Reason}, true
	}
}

// chatModel returns the model of agent a in the chat session at addr when
// its provider's settings differ for that session (registry.ChatScoper),
// built once per session; nil when they do not.
func (ps *providerSet) chatModel(e *Engine, a *config.Agent, addr addrs.Chat) (model.Model, error) {
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
	settings, scoped := cs.ForChat(addr.Name)
	if !scoped {
		return nil, nil
	}
	key := provAddr + " " + addr.String()
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

// forgetChat removes a chat session's record from the state, then its
// journals (destroy).
func (a *applier) forgetChat(ctx context.Context, addr string) error {
	var c *state.Chat
	if err := a.update(ctx, func(st *state.State) {
		c = st.Chats[addr]
		delete(st.Chats, addr)
	}, state.ChatRef(addr)); err != nil {
		return err
	}
	if c == nil {
		return nil
	}
	return removeChatJournals(ctx, a.e.State, c)
}

// removeChatJournals removes the journals a chat session's record refers
// to (its last completed turn's and the one under way).
func removeChatJournals(ctx context.Context, store state.Journals, c *state.Chat) error {
	var errs []error
	for _, rel := range []string{c.Journal, c.Current} {
		if rel == "" {
			continue
		}
		if err := store.RemoveJournal(context.WithoutCancel(ctx), rel); err != nil {
			errs = append(errs, fmt.Errorf("%s: removing its journal: %w", c.Address, err))
		}
	}
	return errors.Join(errs...)
}
