package config

import (
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/providers/registry"
)

// resolveContinues reads every run's continue argument once all runs are
// decoded: the continued run instance becomes the run's Continue and a
// dependency, and a run that sets no sandbox and whose agent names none
// works in the sandbox the continued run's agent used.
func (l *loader) resolveContinues() {
	runs := cty.NilVal
	for _, addr := range slices.Sorted(maps.Keys(l.cfg.RunInstances)) {
		ri := l.cfg.RunInstances[addr]
		if ri.continueAttr == nil {
			continue
		}
		if runs == cty.NilVal {
			runs = l.runAddrValue()
		}
		if target, ok := l.continueRef(ri, runs); ok {
			ri.Continue = target
			ri.DependsOn = append(ri.DependsOn, target)
		}
	}
	done := map[string]bool{}
	var inherit func(addr string, seen map[string]bool)
	inherit = func(addr string, seen map[string]bool) {
		ri := l.cfg.RunInstances[addr]
		if ri == nil || ri.Continue == "" || done[addr] || seen[addr] {
			return // a cycle is reported with the dependency graph
		}
		seen[addr] = true
		inherit(ri.Continue, seen)
		done[addr] = true
		up := l.cfg.RunInstances[ri.Continue]
		a, ua := l.cfg.Agents[ri.Agent], (*Agent)(nil)
		if up != nil {
			ua = l.cfg.Agents[up.Agent]
		}
		if ri.sandboxSet || a == nil || a.Sandbox != "" || ua == nil {
			return
		}
		ri.Sandbox = up.AgentSandbox(ua)
	}
	for _, addr := range slices.Sorted(maps.Keys(l.cfg.RunInstances)) {
		inherit(addr, map[string]bool{})
	}
}

// continueRef reads continue = run.NAME (run.NAME["KEY"], run.NAME[each.key])
// and returns the run instance address; runs is runAddrValue.
func (l *loader) continueRef(ri *RunInstance, runs cty.Value) (string, bool) {
	a := ri.continueAttr
	hasEach := l.cfg.Runs[ri.Name].ForEach != nil
	const how = "continue names the run whose conversation this run continues, like continue = run.NAME, or run.NAME[\"KEY\"] or run.NAME[each.key] when that run has for_each (without quotes)."
	hasRun := false
	for _, tr := range a.Expr.Variables() {
		if tr.RootName() != "run" {
			continue
		}
		hasRun = true
		for _, step := range tr[min(2, len(tr)):] {
			if at, ok := step.(hcl.TraverseAttr); ok {
				l.errorf(tr.SourceRange(), "Invalid continue", "continue takes a run, not its %s. %s", at.Name, how)
				return "", false
			}
		}
	}
	if !hasRun {
		l.errorf(a.Expr.Range(), "Invalid continue", "%s", how)
		return "", false
	}
	if !l.checkRefs(a.Expr, scope{each: hasEach, run: true, where: "continue"}) {
		return "", false
	}
	var each *eachVal
	if hasEach {
		each = &eachVal{key: ri.Key, value: ri.eachValue}
	}
	ctx := l.ctx(a.Expr, each, nil)
	ctx.Variables["run"] = runs
	v, diags := a.Expr.Value(ctx)
	if diags.HasErrors() {
		for _, d := range diags {
			d.Detail += " " + how
		}
		l.diags = append(l.diags, diags...)
		return "", false
	}
	if !v.IsKnown() {
		return "", false // the run failed to decode; reported there
	}
	if v.Type() != cty.String {
		l.errorf(a.Expr.Range(), "Run instance not selected",
			"That run has for_each, so it is a collection of runs: choose the one to continue, like run.NAME[\"KEY\"] or run.NAME[each.key].")
		return "", false
	}
	target := v.AsString()
	if target == ri.Addr {
		l.errorf(a.Expr.Range(), "Run continues itself", "%s can't continue its own conversation: continue names another run, whose transcript this run starts from.", ri.Addr)
		return "", false
	}
	return target, true
}

// runAddrValue is the evaluation context value used to read a run
// reference as an address: run.NAME is the string "run.NAME",
// run.NAME["k"] the instance's address.
func (l *loader) runAddrValue() cty.Value {
	single := map[string]string{}
	var expanded []string
	for name, r := range l.cfg.Runs {
		if r.ForEach == nil {
			single[name] = addrs.Run(name, nil).String()
		} else {
			expanded = append(expanded, name)
		}
	}
	return l.addrValue("run", single, expanded, func(yield func(name, key, addr string)) {
		for _, ri := range l.cfg.RunInstances {
			yield(ri.Name, ri.Key, ri.Addr)
		}
	})
}

// checkScriptRuns verifies that every model provider script scoped to a
// run names a declared run block.
func (l *loader) checkScriptRuns() {
	for _, name := range slices.Sorted(maps.Keys(l.cfg.Providers)) {
		refs, ok := l.cfg.Providers[name].Settings.(registry.RunRefs)
		if !ok {
			continue
		}
		runs := refs.ScriptRuns()
		for _, run := range slices.Sorted(maps.Keys(runs)) {
			if !l.declared("run", run) {
				l.errorf(runs[run], "Script for undeclared run",
					"The %s provider has a script scoped to run %q, but there is no run block with that name.%s", name, run, suggest(run, l.declaredNames("run")))
			}
		}
	}
}
