package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/state"
)

// Budgets (docs/engine.md, "Budgets"). A run's budget covers everything
// the run does, every agent in it included; an agent's budget covers that
// agent's own turns and tool calls within the run. Budgets are left out of
// the run digest, as max_turns is: a run that ran out of one fails with
// its journal kept, and the next apply resumes it from its checkpoint,
// once the budget is raised.

// runBudgetKey keys the run's own budget in state.Run.Budgets; agents'
// are keyed by their address (agent.NAME).
const runBudgetKey = "run"

// stateBudget is b as recorded in the state.
func stateBudget(b *config.Budget) state.Budget {
	return state.Budget{MaxTokens: b.MaxTokens, MaxToolCalls: b.MaxToolCalls, MaxDuration: b.MaxDuration}
}

// loopBudget is b as the turn loop enforces it (zero for nil).
func loopBudget(b *config.Budget) agentloop.Budget {
	if b == nil {
		return agentloop.Budget{}
	}
	return agentloop.Budget{MaxTokens: b.MaxTokens, MaxToolCalls: b.MaxToolCalls, MaxDuration: b.MaxDuration}
}

// runBudgets are the budgets run ri executes under: its own and those of
// the agents it may reach; nil without any.
func runBudgets(cfg *config.Config, ri *config.RunInstance) map[string]state.Budget {
	var out map[string]state.Budget
	set := func(key string, b *config.Budget) {
		if b == nil {
			return
		}
		if out == nil {
			out = map[string]state.Budget{}
		}
		out[key] = stateBudget(b)
	}
	set(runBudgetKey, ri.Budget)
	for _, name := range cfg.AgentClosure(ri.Agent) {
		if a := cfg.Agents[name]; a != nil {
			set(agentAddr(name), a.Budget)
		}
	}
	return out
}

// budgetText renders b for plans and messages:
// (max_tokens = 10,000, max_tool_calls = 5, max_duration = 10m0s).
func budgetText(b state.Budget) string {
	var parts []string
	if b.MaxTokens > 0 {
		parts = append(parts, "max_tokens = "+thousands(b.MaxTokens))
	}
	if b.MaxToolCalls > 0 {
		parts = append(parts, "max_tool_calls = "+thousands(int64(b.MaxToolCalls)))
	}
	if b.MaxDuration > 0 {
		parts = append(parts, "max_duration = "+b.MaxDuration.String())
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// thousands formats n with commas between groups of three digits.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// budgetAttributes shows in a plan the budgets the run executes under:
// "budget" for its own, "agent.NAME.budget" for its agents'.
func budgetAttributes(cfg *config.Config, ri *config.RunInstance, attrs map[string]string) {
	for key, b := range runBudgets(cfg, ri) {
		if key == runBudgetKey {
			attrs["budget"] = budgetText(b)
		} else {
			attrs[key+".budget"] = budgetText(b)
		}
	}
}

// budgetReasons explains, for a failed run about to resume, what its
// budgets mean for the resume: the ones changed since its last attempt,
// and a budget it has already spent (the resumed run stops again at
// once unless that budget is raised).
func budgetReasons(cfg *config.Config, ri *config.RunInstance, prev *state.Run, steps []agentloop.Step) []string {
	now := runBudgets(cfg, ri)
	var reasons []string
	for _, key := range slices.Sorted(maps.Keys(mergedKeys(prev.Budgets, now))) {
		was, had := prev.Budgets[key]
		is, has := now[key]
		if was == is && had == has {
			continue
		}
		from, to := "(none)", "(none)"
		if had {
			from = budgetText(was)
		}
		if has {
			to = budgetText(is)
		}
		who := "the run's budget"
		if key != runBudgetKey {
			who = key + "'s budget"
		}
		reasons = append(reasons, fmt.Sprintf("%s changed: %s → %s", who, from, to))
	}
	spend := agentloop.Spend(steps)
	for _, key := range slices.Sorted(maps.Keys(now)) {
		b := now[key]
		lb := agentloop.Budget{MaxTokens: b.MaxTokens, MaxToolCalls: b.MaxToolCalls, MaxDuration: b.MaxDuration}
		var err *agentloop.BudgetError
		if key == runBudgetKey {
			err = lb.Exhausted(spend.Spent, "")
		} else if s := spend.Agents[strings.TrimPrefix(key, "agent.")]; s != nil {
			err = lb.Exhausted(*s, strings.TrimPrefix(key, "agent."))
		}
		if err != nil {
			reasons = append(reasons, "still out of budget, so the resumed run stops again at once: "+err.Error())
		}
	}
	return reasons
}

func mergedKeys(a, b map[string]state.Budget) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}
