package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/state"
)

// A run's lifecycle conditions (config.Lifecycle) are not part of its
// digest, as in Terraform: changing one re-checks it without running the
// agent again. A precondition is checked at plan when every value it
// refers to is known then (the runs it reads completed before this
// apply), and otherwise when apply reaches the run, before anything of it
// starts. A postcondition is checked on a completed run's result: when it
// fails the run is recorded as failed (its output not recorded), its
// dependents are skipped, and the next apply resumes it from its journal,
// which replays its final answer without a model call and checks the
// postconditions again.

// conditionsError is the error of failed conditions, each located.
func conditionsError(addr string, diags hcl.Diagnostics) error {
	return fmt.Errorf("%s: %w", addr, diags)
}

// planPreconditions checks a run's preconditions at plan against the
// outputs recorded in st; one that refers to a value not known until
// apply is left for apply (runExec.preconditions).
func (e *Engine) planPreconditions(st *state.State, ri *config.RunInstance) error {
	if ri.Lifecycle == nil || len(ri.Lifecycle.Preconditions) == 0 {
		return nil
	}
	diags, _ := e.Config.CheckRunConditions(ri, "precondition", stateRuntimeValues(st), cty.NilVal)
	if diags.HasErrors() {
		return conditionsError(ri.Addr, diags)
	}
	return nil
}

// preconditions checks the run's preconditions when apply reaches it,
// with the outputs its upstream runs recorded.
func (x *runExec) preconditions() error {
	if x.ri.Lifecycle == nil || len(x.ri.Lifecycle.Preconditions) == 0 {
		return nil
	}
	x.a.mu.Lock()
	rv := stateRuntimeValues(x.a.st)
	x.a.mu.Unlock()
	diags, unknown := x.e.Config.CheckRunConditions(x.ri, "precondition", rv, cty.NilVal)
	if diags.HasErrors() {
		return conditionsError(x.addr, diags)
	}
	if unknown {
		return fmt.Errorf("%s: a precondition refers to a value that is still not known when the run starts; it may refer only to variables, locals, each and the outputs of runs", x.addr)
	}
	return nil
}

// postconditions checks a completed run's postconditions on its result
// (self: output, usage, status); a failed one fails the run.
func (x *runExec) postconditions() {
	if x.status != RunCompleted || x.ri.Lifecycle == nil || len(x.ri.Lifecycle.Postconditions) == 0 || x.res == nil {
		return
	}
	out, err := outputValue(x.res.Output)
	if err != nil {
		x.status, x.runErr = RunFailed, fmt.Errorf("postcondition: reading the run's output: %w", err)
		x.errText = x.runErr.Error()
		return
	}
	u := x.res.Usage
	self := cty.ObjectVal(map[string]cty.Value{
		"output": out,
		"status": cty.StringVal(x.status),
		"usage": cty.ObjectVal(map[string]cty.Value{
			"input_tokens":     cty.NumberIntVal(u.InputTokens),
			"output_tokens":    cty.NumberIntVal(u.OutputTokens),
			"total_tokens":     cty.NumberIntVal(u.InputTokens + u.OutputTokens),
			"cached_tokens":    cty.NumberIntVal(u.CachedTokens),
			"reasoning_tokens": cty.NumberIntVal(u.ReasoningTokens),
		}),
	})
	x.a.mu.Lock()
	rv := stateRuntimeValues(x.a.st)
	x.a.mu.Unlock()
	diags, unknown := x.e.Config.CheckRunConditions(x.ri, "postcondition", rv, self)
	if !diags.HasErrors() && unknown {
		diags = hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Postcondition not known", Detail: x.addr + ": a postcondition's value is not known once the run completed"}}
	}
	if diags.HasErrors() {
		x.status, x.runErr = RunFailed, diags
		x.errText = diags.Error()
	}
}

// sandboxPostconditions checks a sandbox's postconditions on what its
// state records once it was created (self: status, id, urls). A failure
// fails the sandbox's apply (its dependents are skipped) and the next
// plan, which checks them again on the recorded sandbox, until the
// condition or the sandbox (apply -replace) changes. The sandbox itself
// stays, recorded, as Terraform keeps an object whose postcondition
// failed.
func (e *Engine) sandboxPostconditions(ss *state.Sandbox) error {
	if ss == nil {
		return nil
	}
	si := e.Config.SandboxInstances[ss.Address]
	if si == nil || len(si.Postconditions) == 0 {
		return nil
	}
	urls := map[string]cty.Value{}
	for k, v := range ss.URLs {
		urls[k] = cty.StringVal(v)
	}
	urlVal := cty.MapValEmpty(cty.String)
	if len(urls) > 0 {
		urlVal = cty.MapVal(urls)
	}
	self := cty.ObjectVal(map[string]cty.Value{
		"status": cty.StringVal(ss.Status),
		"id":     cty.StringVal(ss.Session.ID),
		"urls":   urlVal,
	})
	if diags := e.Config.CheckSandboxPostconditions(si, self); diags.HasErrors() {
		return fmt.Errorf("%w; the sandbox is kept: fix the condition, or apply -replace=%s to create it again", conditionsError(ss.Address, diags), ss.Address)
	}
	return nil
}

// conditionPlanAttributes shows in a run's plan its conditions
// ("precondition.0" = the condition's source) and the hooks of the run
// and of the agents it may reach ("hook.EVENT" = the command, with the
// agent it is on). Neither is part of the run's digest: they are shown
// so that a reviewer sees what an apply will check and run.
func conditionPlanAttributes(cfg *config.Config, ri *config.RunInstance, attrs map[string]string) {
	if lc := ri.Lifecycle; lc != nil {
		for i, c := range lc.Preconditions {
			attrs[fmt.Sprintf("precondition.%d", i)] = exprSource(cfg, c.Condition)
		}
		for i, c := range lc.Postconditions {
			attrs[fmt.Sprintf("postcondition.%d", i)] = exprSource(cfg, c.Condition)
		}
	}
	hooks := map[string][]string{}
	add := func(owner string, hs []*config.Hook) {
		for _, h := range hs {
			b, _ := json.Marshal(h.Command)
			hooks[h.Event] = append(hooks[h.Event], fmt.Sprintf("%s %s (timeout %s)", owner, b, h.Timeout))
		}
	}
	add("run", ri.Hooks)
	for _, a := range cfg.AgentClosure(ri.Agent) {
		if ag := cfg.Agents[a]; ag != nil {
			add("agent."+a, ag.Hooks)
		}
	}
	for ev, list := range hooks {
		attrs["hook."+ev] = strings.Join(list, "; ")
	}
}

// exprSource is expr as written in the configuration.
func exprSource(cfg *config.Config, expr hcl.Expression) string {
	rng := expr.Range()
	if f := cfg.Files[rng.Filename]; f != nil {
		return strings.TrimSpace(string(rng.SliceBytes(f.Bytes)))
	}
	return fmt.Sprintf("(%s:%d)", rng.Filename, rng.Start.Line)
}
