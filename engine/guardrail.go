package engine

import (
	"fmt"
	"slices"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// runGuardrailNames lists every guardrail that guards run ri: its own and
// those of the agents it may reach, sorted.
func runGuardrailNames(cfg *config.Config, ri *config.RunInstance) []string {
	names := slices.Clone(ri.Guardrails)
	for _, a := range cfg.AgentClosure(ri.Agent) {
		if ag := cfg.Agents[a]; ag != nil {
			names = append(names, ag.Guardrails...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// guardrailJudges lists the agents judging run ri's agent guardrails
// that are not otherwise part of it.
func guardrailJudges(cfg *config.Config, ri *config.RunInstance) []string {
	closure := cfg.AgentClosure(ri.Agent)
	var out []string
	for _, name := range runGuardrailNames(cfg, ri) {
		if g := cfg.Guardrails[name]; g != nil && g.Agent != "" && !slices.Contains(closure, g.Agent) && !slices.Contains(out, g.Agent) {
			out = append(out, g.Agent)
		}
	}
	return out
}

// guardrailInputs adds run ri's guardrails to its digest inputs and plan
// attributes: each guardrail's definition, the run's own list, and the
// agents judging them. Changing any of them re-runs the run.
func guardrailInputs(cfg *config.Config, ri *config.RunInstance, inputs map[string]string, at *attributes) {
	for _, name := range runGuardrailNames(cfg, ri) {
		g := cfg.Guardrails[name]
		if g == nil {
			continue
		}
		key := "guardrail." + name
		def := g.Definition()
		inputs[key] = digestJSON(def)
		at.set(key+".on", g.On)
		if g.Condition.Source != "" {
			at.set(key+".condition", g.Condition.Source)
		}
		if g.Agent != "" {
			at.set(key+".agent", g.Agent)
		}
		if g.Parallel {
			at.set(key+".parallel", true)
		}
		if g.Message != "" {
			at.set(key+".message", g.Message)
		}
	}
	if len(ri.Guardrails) > 0 {
		inputs["guardrails"] = digestJSON(ri.Guardrails)
		at.set("guardrails", ri.Guardrails)
	}
	for _, j := range guardrailJudges(cfg, ri) {
		inputs[agentAddr(j)] = agentDigest(cfg, j, ri.Name)
		agentAttributes(cfg, j, ri.Name, at)
	}
}

// loopGuardrails are the named guardrails as the turn loop takes them.
func loopGuardrails(cfg *config.Config, names []string) []agentloop.Guardrail {
	var out []agentloop.Guardrail
	for _, name := range names {
		g := cfg.Guardrails[name]
		if g == nil {
			continue
		}
		lg := agentloop.Guardrail{Name: g.Name, On: g.On, Judge: g.Agent, Parallel: g.Parallel, Message: g.Message, Location: g.Location()}
		if g.Agent == "" {
			cond := g.Condition
			lg.Check = func(in agentloop.Guarded) (bool, error) {
				return cond.Passes(config.Guarded{Text: in.Text, Tool: in.Tool, Arguments: in.Arguments, Agent: in.Agent})
			}
		}
		out = append(out, lg)
	}
	return out
}

// addJudges builds the agents judging run ri's agent guardrails that its
// agents do not include: plain agents (config checks they have no
// sandbox, tools or handoffs), with their model and instructions.
func (e *Engine) addJudges(ri *config.RunInstance, agents map[string]*agentloop.Agent) error {
	for _, name := range guardrailJudges(e.Config, ri) {
		a := e.Config.Agents[name]
		if a == nil {
			return fmt.Errorf("guardrail agent %q is not declared", name)
		}
		m, modelName, err := e.provs().model(e, a, ri.Name)
		if err != nil {
			return fmt.Errorf("guardrail agent %q: %w", name, err)
		}
		agents[name] = &agentloop.Agent{
			Name: a.Name, Model: m, ModelName: modelName, Provider: e.modelProviderType(a),
			Instructions: a.Instructions, Settings: modelSettings(a.Settings), ModelFallback: a.ModelFallback,
			OutputSchema: a.OutputSchema, MaxTurns: a.MaxTurns, Budget: loopBudget(a.Budget),
		}
	}
	return nil
}

// guardrailTrip is the state's record of the guardrail that stopped a
// run, nil when err is not a trip.
func guardrailTrip(err error) *state.GuardrailTrip {
	t, ok := agentloop.IsGuardrailTripped(err)
	if !ok {
		return nil
	}
	return &state.GuardrailTrip{Name: t.Verdict.Name, On: t.Verdict.On, Message: t.Verdict.Message, Agent: t.Agent, Tool: t.Tool}
}

// scrubTrip is t with its message scrubbed (a judge's reason may quote
// what it judged).
func scrubTrip(sc *sandbox.Scrubber, t *state.GuardrailTrip) *state.GuardrailTrip {
	if t == nil {
		return nil
	}
	c := *t
	c.Message = sc.String(c.Message)
	return &c
}

// guardrailPlanAttributes shows in a run's plan each guardrail guarding
// it: what it checks and how ("output: !can(regex(...))", "input: agent
// judge, parallel"), with its message.
func guardrailPlanAttributes(cfg *config.Config, ri *config.RunInstance, attrs map[string]string) {
	for _, name := range runGuardrailNames(cfg, ri) {
		g := cfg.Guardrails[name]
		if g == nil {
			continue
		}
		how := g.Condition.Source
		if g.Agent != "" {
			how = "agent " + g.Agent
			if g.Parallel {
				how += ", parallel"
			}
		}
		attrs["guardrail."+name] = g.On + ": " + how
		if g.Message != "" {
			attrs["guardrail."+name+".message"] = g.Message
		}
	}
}
