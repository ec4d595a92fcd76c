package agentloop

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentctl/agentctl/model"
)

// ErrBudget ends a run that spent all of a budget; the run stays
// resumable, and resumes once the budget is raised. Errors of this kind
// are *BudgetError.
var ErrBudget = errors.New("budget exceeded")

// Budget bounds what a run (Runner.Budget) or one agent within it
// (Agent.Budget) may spend. A zero limit is no limit.
//
// The run's budget covers everything the run does: every agent it hands
// off to or calls as a tool. An agent's budget covers that agent's own
// model turns and tool calls within the run. Limits are checked before
// each step: a model call starts only while the tokens and the time spent
// are under their limits, and a response's tool calls run only as far as
// max_tool_calls allows. A step in flight is never cut short, so a
// response may take the tokens past max_tokens; a final answer that does
// still completes the run.
type Budget struct {
	// MaxTokens bounds the model tokens: input plus output, as the
	// provider reports them.
	MaxTokens int64
	// MaxToolCalls bounds the tool calls answered (handoffs, agent tools
	// and calls rejected by a reviewer included).
	MaxToolCalls int
	// MaxDuration bounds the time spent. For the run, its running time
	// summed over its attempts (recorded in the journal with every step,
	// so time between applies does not count); for an agent, the time of
	// its own model calls and tool calls (an agent-tool call includes the
	// nested run).
	MaxDuration time.Duration
}

// Spent is what a run, or one agent within it, has spent.
type Spent struct {
	Usage     model.Usage   `json:"usage"`
	ToolCalls int           `json:"tool_calls"`
	Duration  time.Duration `json:"duration"`
}

// Tokens is the figure max_tokens bounds: input plus output tokens.
func (s Spent) Tokens() int64 { return s.Usage.InputTokens + s.Usage.OutputTokens }

// Spending is what a run has spent, in total and by agent.
type Spending struct {
	Spent
	Agents map[string]*Spent
}

// agent returns the spending of agent, creating it.
func (s *Spending) agent(name string) *Spent {
	if s.Agents == nil {
		s.Agents = map[string]*Spent{}
	}
	a := s.Agents[name]
	if a == nil {
		a = &Spent{}
		s.Agents[name] = a
	}
	return a
}

// add counts one checkpointed step.
func (s *Spending) add(st Step) {
	if st.Elapsed > s.Duration {
		s.Duration = st.Elapsed
	}
	switch st.Kind {
	case StepModel, StepCompaction:
		if st.Response == nil {
			return
		}
		s.Usage.Add(st.Response.Usage)
		a := s.agent(st.Agent)
		a.Usage.Add(st.Response.Usage)
		a.Duration += st.Duration
	case StepTool:
		if st.Result == nil {
			return
		}
		s.ToolCalls++
		a := s.agent(st.Agent)
		a.ToolCalls++
		a.Duration += st.Duration
	}
}

// Spend reads what a run's steps spent: tokens, tool calls and running
// time, in total and by agent.
func Spend(steps []Step) Spending {
	var s Spending
	for _, st := range steps {
		s.add(st)
	}
	return s
}

// BudgetError is a budget that ran out.
type BudgetError struct {
	// Agent is the agent whose budget ran out; "" for the run's budget.
	Agent string
	// Limit is max_tokens, max_tool_calls or max_duration.
	Limit string
	// Used and Max are the figure and its limit (tokens, tool calls, or
	// nanoseconds for max_duration).
	Used, Max int64
	// Asked is, for max_tool_calls, how many calls of the response were
	// left unanswered.
	Asked int
}

func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

func (e *BudgetError) Error() string {
	var what string
	switch e.Limit {
	case "max_tokens":
		what = thousands(e.Used) + " tokens"
	case "max_tool_calls":
		what = thousands(e.Used) + " tool calls"
	default:
		what = time.Duration(e.Used).Round(time.Millisecond).String() + " of running time"
	}
	limit := e.Limit + " = " + thousands(e.Max)
	if e.Limit == "max_duration" {
		limit = e.Limit + " = " + time.Duration(e.Max).String()
	}
	var msg, where string
	if e.Agent == "" {
		msg = fmt.Sprintf("%s: %s used of %s", ErrBudget, what, limit)
		where = "the run's budget block"
	} else {
		msg = fmt.Sprintf("%s: agent %q used %s of its %s", ErrBudget, e.Agent, what, limit)
		where = fmt.Sprintf("agent %q's budget block", e.Agent)
	}
	if e.Asked > 0 {
		msg += fmt.Sprintf(", and the model asked for %d more", e.Asked)
	}
	return fmt.Sprintf("%s; raise %s in %s and apply again to resume the run from its checkpoint", msg, e.Limit, where)
}

// thousands formats n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := ""
	if n < 0 {
		neg, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return neg + s
}

// overBudget checks the run's budget and agent's before a model call:
// the tokens and the time spent must be under their limits.
func (st *runState) overBudget(agent *Agent) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.spent.Duration = st.elapsedLocked()
	check := func(b Budget, s Spent, name string) error {
		if b.MaxTokens > 0 && s.Tokens() >= b.MaxTokens {
			return &BudgetError{Agent: name, Limit: "max_tokens", Used: s.Tokens(), Max: b.MaxTokens}
		}
		if b.MaxDuration > 0 && s.Duration >= b.MaxDuration {
			return &BudgetError{Agent: name, Limit: "max_duration", Used: int64(s.Duration), Max: int64(b.MaxDuration)}
		}
		return nil
	}
	if err := check(st.r.Budget, st.spent.Spent, ""); err != nil {
		return err
	}
	if agent != nil {
		return check(agent.Budget, *st.spent.agent(agent.Name), agent.Name)
	}
	return nil
}

// toolAllowance returns how many of n tool calls of agent the budgets
// let run, and the error that stops the run once they did (nil when all
// may run).
func (st *runState) toolAllowance(agent *Agent, n int) (int, error) {
	if err := st.overBudget(agent); err != nil {
		return 0, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	allowed := n
	var stop *BudgetError
	check := func(b Budget, used int, name string) {
		if b.MaxToolCalls <= 0 {
			return
		}
		left := max(b.MaxToolCalls-used, 0)
		if left < allowed {
			allowed = left
			stop = &BudgetError{Agent: name, Limit: "max_tool_calls", Used: int64(used + left), Max: int64(b.MaxToolCalls), Asked: n - left}
		}
	}
	check(st.r.Budget, st.spent.ToolCalls, "")
	check(agent.Budget, st.spent.agent(agent.Name).ToolCalls, agent.Name)
	if stop == nil {
		return n, nil
	}
	return allowed, stop
}

// elapsedLocked is the run's running time: what earlier attempts
// recorded plus this attempt's. st.mu is held.
func (st *runState) elapsedLocked() time.Duration {
	return st.baseElapsed + time.Since(st.started)
}

// clone copies s, its agents' figures included.
func (s Spending) clone() Spending {
	c := Spending{Spent: s.Spent}
	if s.Agents != nil {
		c.Agents = make(map[string]*Spent, len(s.Agents))
		for name, a := range s.Agents {
			v := *a
			c.Agents[name] = &v
		}
	}
	return c
}

// Exhausted reports the first limit of b that s has reached, as the
// error a run stopping on it gives (agent names the agent the budget
// belongs to, "" for the run's): tokens or running time at their limit
// stop the next model call, tool calls at theirs stop the next tool
// call. nil means b lets the run go on.
func (b Budget) Exhausted(s Spent, agent string) *BudgetError {
	switch {
	case b.MaxTokens > 0 && s.Tokens() >= b.MaxTokens:
		return &BudgetError{Agent: agent, Limit: "max_tokens", Used: s.Tokens(), Max: b.MaxTokens}
	case b.MaxDuration > 0 && s.Duration >= b.MaxDuration:
		return &BudgetError{Agent: agent, Limit: "max_duration", Used: int64(s.Duration), Max: int64(b.MaxDuration)}
	case b.MaxToolCalls > 0 && s.ToolCalls >= b.MaxToolCalls:
		return &BudgetError{Agent: agent, Limit: "max_tool_calls", Used: int64(s.ToolCalls), Max: int64(b.MaxToolCalls)}
	}
	return nil
}
