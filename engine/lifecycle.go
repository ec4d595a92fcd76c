package engine

import (
	"fmt"

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
