package chat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/state"
)

// turn is one turn being carried out.
type turn struct {
	c       *state.Chat // the session's record as the turn starts
	cur     string      // the turn's journal
	input   string
	resume  bool
	prior   []model.Item     // the conversation of the completed turns
	history []agentloop.Step // the steps of the interrupted turn it resumes
	journal state.JournalWriter

	mu     sync.Mutex     // checkpoints of concurrent calls arrive at once
	counts map[string]int // model turns of each agent in this turn
}

// run carries out one turn: input, or the interrupted turn (resume).
func (s *Session) run(ctx context.Context, input string, resume bool) (*agentloop.Result, error) {
	t, err := s.begin(ctx, input, resume)
	if err != nil {
		return nil, err
	}
	defer t.journal.Close()
	start := t.c.LastAgent
	if start == "" || s.sess.Agents()[start] == nil {
		start = s.agent
	}
	res, runErr, err := s.sess.RunTurn(ctx, engine.Turn{
		Agent: start, Input: t.input, Prior: t.prior, History: t.history,
		Resume: resume, Approvals: resumedApprovals(t.c, resume), Journal: t.journal,
		OnStep: t.count, Events: s.Events, Ask: s.asker(),
	})
	switch {
	case err != nil:
		return nil, err
	case runErr == nil:
		return s.completed(ctx, t, res)
	case errors.Is(runErr, agentloop.ErrInterrupted) || errors.Is(runErr, context.Canceled):
		return s.interrupted(ctx, t, res, runErr)
	}
	return s.dropped(ctx, t, res, runErr)
}

// begin reads what the turn starts from (the conversation so far, and the
// steps of the turn it resumes), opens its journal and records a new turn
// as under way.
func (s *Session) begin(ctx context.Context, input string, resume bool) (*turn, error) {
	now := time.Now().UTC()
	c := s.Record()
	if c == nil {
		c = &state.Chat{Address: s.key, Agent: s.agent, Status: state.ChatIdle, CreatedAt: now}
	}
	prior, err := transcript(ctx, s.key, c, s.e.Steps)
	if err != nil {
		return nil, err
	}
	t := &turn{c: c, cur: c.Current, input: input, resume: resume, prior: prior, counts: map[string]int{}}
	if resume {
		if t.history, err = s.e.Steps(ctx, journalRun(s.key, t.cur, engine.RunRunning, c.Steps)); err != nil {
			return nil, journalError(s.key, err)
		}
		t.input = c.Input
	} else {
		var lineage string
		s.sess.View(func(st *state.State) { lineage = st.Lineage })
		t.cur = state.ScopedJournalName(lineage, fmt.Sprintf("%s.turn%d", s.key, c.Turns+1))
		// A file left by a turn that never reached the state is stale.
		if err := s.e.State.RemoveJournal(context.WithoutCancel(ctx), t.cur); err != nil {
			return nil, fmt.Errorf("%s: clearing old journal: %w", s.key, err)
		}
	}
	if t.journal, err = s.e.State.OpenJournal(ctx, t.cur); err != nil {
		return nil, fmt.Errorf("%s: opening journal: %w", s.key, err)
	}
	for _, st := range t.history {
		if st.Kind == agentloop.StepModel && st.Response != nil {
			t.counts[st.Agent]++
		}
	}
	if !resume {
		if err := s.sess.Update(ctx, func(st *state.State) {
			if st.Chats == nil {
				st.Chats = map[string]*state.Chat{}
			}
			r := *c
			r.Status, r.Current, r.Input, r.Steps, r.Approvals, r.UpdatedAt = state.ChatRunning, t.cur, t.input, 0, nil, now
			r.Sandboxes = slices.Sorted(maps.Keys(s.sess.Workspaces()))
			st.Chats[s.key] = &r
		}, state.ChatRef(s.key)); err != nil {
			t.journal.Close()
			return nil, err
		}
	}
	return t, nil
}

// count counts the agents' model turns as their steps are checkpointed.
func (t *turn) count(st agentloop.Step) {
	if st.Kind == agentloop.StepModel && st.Response != nil {
		t.mu.Lock()
		t.counts[st.Agent]++
		t.mu.Unlock()
	}
}

// resumedApprovals are the decisions recorded for the turn being resumed.
func resumedApprovals(c *state.Chat, resume bool) []*state.Approval {
	if !resume {
		return nil
	}
	return c.Approvals
}

// interrupted keeps an interrupted turn in the state, checkpointed, for
// the next session to resume.
func (s *Session) interrupted(ctx context.Context, t *turn, res *agentloop.Result, runErr error) (*agentloop.Result, error) {
	if err := s.sess.Update(ctx, func(st *state.State) { st.Chats[s.key].Steps = t.journal.Len() }, state.ChatRef(s.key)); err != nil {
		return nil, errors.Join(runErr, err)
	}
	return res, fmt.Errorf("%s: the turn was interrupted; it is checkpointed, and the next agentctl chat -session %s agent.%s resumes it: %w", s.key, s.addr.Name, s.agent, runErr)
}

// dropped drops a failed turn: the conversation stays as it was before
// it.
func (s *Session) dropped(ctx context.Context, t *turn, res *agentloop.Result, runErr error) (*agentloop.Result, error) {
	if err := s.sess.Update(ctx, func(st *state.State) {
		r := st.Chats[s.key]
		r.Status, r.Current, r.Input, r.Steps, r.Approvals, r.UpdatedAt = state.ChatIdle, "", "", 0, nil, time.Now().UTC()
	}, state.ChatRef(s.key)); err != nil {
		return nil, errors.Join(runErr, err)
	}
	t.journal.Close()
	if err := s.e.State.RemoveJournal(context.WithoutCancel(ctx), t.cur); err != nil {
		return nil, errors.Join(runErr, err)
	}
	return res, &TurnError{Session: s.key, Err: runErr}
}

// completed records a completed turn: its journal becomes the
// conversation's, and the journal of the turn before goes.
func (s *Session) completed(ctx context.Context, t *turn, res *agentloop.Result) (*agentloop.Result, error) {
	old := t.c.Journal
	if err := s.sess.Update(ctx, func(st *state.State) {
		r := st.Chats[s.key]
		r.Status, r.Journal, r.Current, r.Input, r.Steps, r.Approvals = state.ChatIdle, t.cur, "", "", 0, nil
		r.Turns++
		r.LastAgent = res.Agent
		r.Usage.Add(res.Usage)
		if r.AgentTurns == nil {
			r.AgentTurns = map[string]int{}
		}
		for a, n := range t.counts {
			r.AgentTurns[a] += n
		}
		r.UpdatedAt = time.Now().UTC()
		s.mu.Lock()
		maps.Copy(s.offsets, r.AgentTurns)
		s.mu.Unlock()
	}, state.ChatRef(s.key)); err != nil {
		return nil, err
	}
	if old != "" && old != t.cur {
		if err := s.e.State.RemoveJournal(context.WithoutCancel(ctx), old); err != nil {
			return res, fmt.Errorf("%s: removing the previous turn's journal: %w", s.key, err)
		}
	}
	return res, nil
}

// NoReviewerReason is what the model reads for a call that needs approval
// when no one can be asked (standard input is not a terminal).
const NoReviewerReason = "no reviewer could be asked (agentctl chat's standard input is not a terminal), so the call was refused for this turn"

// asker asks e.Approver about a call that needs approval (the engine
// records the decision in the session's record). A chat has no later
// apply to decide a deferred call, so a call not approved (no reviewer,
// an empty answer) is refused for this turn and the model is told why.
func (s *Session) asker() func(context.Context, string, state.Approval) engine.Answer {
	var mu sync.Mutex
	always := map[string]engine.Answer{} // tool → the session's standing answer
	return func(ctx context.Context, tool string, call state.Approval) engine.Answer {
		mu.Lock()
		ans, ok := always[tool]
		mu.Unlock()
		switch {
		case ok:
			ans.Always, ans.Reason = false, "always "+ans.Decision+" for this session"
		case s.e.Approver == nil:
			ans = engine.Answer{Decision: state.ApprovalRejected, Reason: NoReviewerReason}
		default:
			ans = s.e.Approver.Approve(ctx, s.key, call)
			if ans.Decision != state.ApprovalApproved && ans.Decision != state.ApprovalRejected {
				ans = engine.Answer{Decision: state.ApprovalRejected, By: ans.By, Reason: "not approved in the chat"}
			}
		}
		if ans.Always {
			mu.Lock()
			always[tool] = ans
			mu.Unlock()
		}
		return ans
	}
}

// Reset starts the conversation over: the record keeps its agent and
// sandboxes (their workspaces are untouched), and the journals go.
func (s *Session) Reset(ctx context.Context) error {
	c := s.Record()
	if c == nil {
		return nil
	}
	if err := s.sess.Update(ctx, func(st *state.State) {
		st.Chats[s.key] = &state.Chat{Address: s.key, Agent: s.agent, Status: state.ChatIdle, Sandboxes: c.Sandboxes, CreatedAt: c.CreatedAt, UpdatedAt: time.Now().UTC()}
	}, state.ChatRef(s.key)); err != nil {
		return err
	}
	s.mu.Lock()
	clear(s.offsets)
	s.mu.Unlock()
	var errs []error
	for _, rel := range []string{c.Journal, c.Current} {
		if rel == "" {
			continue
		}
		if err := s.e.State.RemoveJournal(context.WithoutCancel(ctx), rel); err != nil {
			errs = append(errs, fmt.Errorf("%s: removing its journal: %w", c.Address, err))
		}
	}
	return errors.Join(errs...)
}
