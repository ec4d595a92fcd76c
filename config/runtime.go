package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/addrs"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/agentctl/agentctl/providers/registry"
)

// RuntimeValues are the values known only during apply.
type RuntimeValues struct {
	// RunOutputs maps a run instance address to the run's output: a
	// string, or an object when the agent has an output_schema.
	RunOutputs map[string]cty.Value
	// SandboxURLs maps a sandbox instance address to its exposed ports'
	// URLs, keyed by port number.
	SandboxURLs map[string]map[string]string
	// URLStandIns evaluates every sandbox URL as its stand-in
	// (URLStandIn) for each of the sandbox's ports, ignoring SandboxURLs.
	// An input evaluated so is known before its sandboxes exist and does
	// not change when their URLs do (a stopped Docker sandbox starts on
	// new host ports, a Daytona preview URL is signed anew): the run
	// digest covers it, since a URL is an address, not content.
	URLStandIns bool
}

// URLStandIn is the text that stands for a sandbox URL in the input a
// run digest covers: the reference itself, e.g. sandbox.web.urls["8080"].
func URLStandIn(addr string, port int) string {
	return fmt.Sprintf("%s.urls[%q]", addr, fmt.Sprint(port))
}

// OutputValue is an evaluated output.
type OutputValue struct {
	Value     cty.Value
	Sensitive bool
}

// lateObjects builds the run and sandbox objects of the evaluation
// context. With rv nil every value is unknown (load-time validation).
func (c *Config) lateObjects(rv *RuntimeValues) *lateVals {
	return c.lateObjectsOf(rv, nil)
}

// lateObjectsOf is lateObjects holding only the runs and sandboxes (by
// block name) that refs names; refs nil holds all of them.
func (c *Config) lateObjectsOf(rv *RuntimeValues, refs *lateRefs) *lateVals {
	runVal := func(addr string) cty.Value {
		out := cty.DynamicVal
		if rv != nil {
			if v, ok := rv.RunOutputs[addr]; ok && v != cty.NilVal {
				out = v
			}
		}
		return cty.ObjectVal(map[string]cty.Value{"output": out})
	}
	sbVal := func(addr string) cty.Value {
		urls := cty.DynamicVal
		if rv != nil && rv.URLStandIns {
			urls = cty.MapValEmpty(cty.String)
			if si := c.SandboxInstances[addr]; si != nil && len(si.Ports) > 0 {
				vm := map[string]cty.Value{}
				for _, port := range si.Ports {
					vm[fmt.Sprint(port)] = cty.StringVal(URLStandIn(addr, port))
				}
				urls = cty.MapVal(vm)
			}
		} else if rv != nil {
			if m, ok := rv.SandboxURLs[addr]; ok {
				if len(m) == 0 {
					urls = cty.MapValEmpty(cty.String)
				} else {
					vm := map[string]cty.Value{}
					for k, u := range m {
						vm[k] = cty.StringVal(u)
					}
					urls = cty.MapVal(vm)
				}
			}
		}
		return cty.ObjectVal(map[string]cty.Value{"urls": urls})
	}
	runs := map[string]cty.Value{}
	for name, r := range c.Runs {
		if !refs.hasRun(name) {
			continue
		}
		if r.ForEach == nil {
			runs[name] = runVal(addrs.Run(name, nil).String())
			continue
		}
		keys := map[string]cty.Value{}
		for _, ri := range c.RunInstances {
			if ri.Name == name {
				keys[ri.Key] = runVal(ri.Addr)
			}
		}
		runs[name] = objectOf(keys)
	}
	sbs := map[string]cty.Value{}
	for name, s := range c.Sandboxes {
		if !refs.hasSandbox(name) {
			continue
		}
		if s.ForEach == nil {
			sbs[name] = sbVal(addrs.Sandbox(name, nil).String())
			continue
		}
		keys := map[string]cty.Value{}
		for _, si := range c.SandboxInstances {
			if si.Name == name {
				keys[si.Key] = sbVal(si.Addr)
			}
		}
		sbs[name] = objectOf(keys)
	}
	return &lateVals{run: objectOf(runs), sandbox: objectOf(sbs)}
}

func (c *Config) runCtx(ri *RunInstance, late *lateVals) *hcl.EvalContext {
	var each *eachVal
	if r, ok := c.Runs[ri.Name]; ok && r.ForEach != nil {
		each = &eachVal{key: ri.Key, value: ri.eachValue}
	}
	return buildCtx(c.funcs, c.varsObj, c.localsObj, each, late)
}

// lateRefs are the run and sandbox blocks an expression refers to.
type lateRefs struct {
	runs, sandboxes map[string]bool
}

// hasRun reports whether the objects hold run block name; a nil lateRefs
// holds all.
func (r *lateRefs) hasRun(name string) bool { return r == nil || r.runs[name] }

// hasSandbox is hasRun for sandbox blocks.
func (r *lateRefs) hasSandbox(name string) bool { return r == nil || r.sandboxes[name] }

// referencedLate returns the run and sandbox blocks expr refers to, or
// nil (all of them) when it refers to the run or sandbox object whole.
func referencedLate(expr hcl.Expression) *lateRefs {
	refs := &lateRefs{runs: map[string]bool{}, sandboxes: map[string]bool{}}
	for _, t := range expr.Variables() {
		var names map[string]bool
		switch t.RootName() {
		case "run":
			names = refs.runs
		case "sandbox":
			names = refs.sandboxes
		default:
			continue
		}
		if len(t) < 2 {
			return nil
		}
		attr, ok := t[1].(hcl.TraverseAttr)
		if !ok {
			return nil
		}
		names[attr.Name] = true
	}
	return refs
}

// EvalRunInput evaluates a run instance's input with the outputs of the
// runs it depends on and the sandbox URLs known at apply time. It builds
// only the objects of the runs and sandboxes the input refers to, so its
// cost does not grow with the configuration. To evaluate many inputs
// against the same values, use RunInputEvaluator.
func (c *Config) EvalRunInput(ri *RunInstance, rv RuntimeValues) (string, hcl.Diagnostics) {
	return c.evalRunInput(ri, c.lateObjectsOf(&rv, referencedLate(ri.InputExpr)))
}

// RunInputEvaluator returns a function that evaluates run inputs against
// one set of runtime values, whose run and sandbox objects it builds once.
// Building them costs as much as the whole configuration, so plan, which
// evaluates every input against the same state, calls it once rather than
// EvalRunInput once per run.
func (c *Config) RunInputEvaluator(rv RuntimeValues) func(ri *RunInstance) (string, hcl.Diagnostics) {
	late := c.lateObjects(&rv)
	return func(ri *RunInstance) (string, hcl.Diagnostics) {
		return c.evalRunInput(ri, late)
	}
}

// evalRunInput evaluates the input of ri against late.
func (c *Config) evalRunInput(ri *RunInstance, late *lateVals) (string, hcl.Diagnostics) {
	v, diags := ri.InputExpr.Value(c.runCtx(ri, late))
	if diags.HasErrors() {
		return "", diags
	}
	rng := ri.InputExpr.Range()
	if v.ContainsMarked() {
		return "", hcl.Diagnostics{sensitiveInputDiag(rng)}
	}
	if !v.IsWhollyKnown() {
		return "", hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Run input not known yet",
			Detail:   fmt.Sprintf("The input of %s depends on runs or sandboxes that have not completed (%s).", ri.Addr, strings.Join(ri.DependsOn, ", ")),
			Subject:  &rng,
		}}
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil || s.IsNull() {
		return "", hcl.Diagnostics{inputTypeDiag(rng, err)}
	}
	return s.AsString(), nil
}

// EvalExpr evaluates expr as an output's value is evaluated: with the
// variables, locals and functions, and the run outputs and sandbox URLs
// in rv (agentctl console). References to runs and sandboxes rv does not
// hold are unknown; sensitive values stay marked.
func (c *Config) EvalExpr(expr hcl.Expression, rv RuntimeValues) (cty.Value, hcl.Diagnostics) {
	return expr.Value(buildCtx(c.funcs, c.varsObj, c.localsObj, nil, c.lateObjectsOf(&rv, referencedLate(expr))))
}

// EvalOutputs evaluates every output. Values that depend on runs not in
// rv are unknown.
func (c *Config) EvalOutputs(rv RuntimeValues) (map[string]OutputValue, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	ctx := buildCtx(c.funcs, c.varsObj, c.localsObj, nil, c.lateObjects(&rv))
	out := map[string]OutputValue{}
	for _, name := range slices.Sorted(maps.Keys(c.Outputs)) {
		o := c.Outputs[name]
		v, ds := o.Expr.Value(ctx)
		diags = append(diags, ds...)
		if ds.HasErrors() {
			continue
		}
		if v.ContainsMarked() && !o.Sensitive {
			diags = append(diags, sensitiveOutputDiag(o))
			continue
		}
		v, _ = v.UnmarkDeep()
		out[name] = OutputValue{Value: v, Sensitive: o.Sensitive}
	}
	return out, diags
}

// SensitiveValues returns every sensitive string the configuration
// holds (sensitive variables, env() results, provider credentials),
// longest first, for scrubbing output.
func (c *Config) SensitiveValues() []string {
	if c.col == nil {
		return nil
	}
	c.col.mu.Lock()
	defer c.col.mu.Unlock()
	out := make([]string, 0, len(c.col.values))
	for v := range c.col.values {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

func sensitiveInputDiag(rng hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Sensitive value not allowed here",
		Detail:   "A run input can't use a sensitive value (a sensitive variable, env() or a value derived from them): it is sent to the model and stored in state. Sensitive values may flow only into ephemeral env entries (env \"NAME\" { value = ..., ephemeral = true }), provider settings and outputs with sensitive = true.",
		Subject:  &rng,
	}
}

func inputTypeDiag(rng hcl.Range, err error) *hcl.Diagnostic {
	detail := "A run input must be a string."
	if err != nil {
		detail = fmt.Sprintf("A run input must be a string: %s. Use jsonencode(...) to pass structured values.", err)
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Incorrect attribute value type", Detail: detail, Subject: &rng}
}

func sensitiveOutputDiag(o *Output) *hcl.Diagnostic {
	r := o.Expr.Range()
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Output refers to sensitive values",
		Detail:   fmt.Sprintf("The value of output %q uses a sensitive value. Add sensitive = true to the output block to show it only on request and never in plans or logs.", o.Name),
		Subject:  &r,
	}
}

// validateLate checks run inputs and outputs with unknown run outputs and
// sandbox URLs, and records the runs and sandboxes each input references
// in its DependsOn.
func (l *loader) validateLate() {
	c := l.cfg
	late := c.lateObjects(nil)
	for _, addr := range slices.Sorted(maps.Keys(c.RunInstances)) {
		ri := c.RunInstances[addr]
		hasEach := c.Runs[ri.Name].ForEach != nil
		for _, tr := range l.dependsOn[addr] {
			ri.DependsOn = append(ri.DependsOn, l.traversalTargets(tr, true)...)
		}
		if !l.checkRefs(ri.InputExpr, scope{each: hasEach, run: true, sandbox: true, where: "a run input"}) {
			continue
		}
		deps := map[string]bool{}
		for _, d := range ri.DependsOn {
			deps[d] = true
		}
		sbs := map[string]bool{}
		for _, tr := range ri.InputExpr.Variables() {
			if oneOf(tr.RootName(), "run", "sandbox") {
				for _, t := range l.traversalTargets(tr, false) {
					deps[t] = true
					if tr.RootName() == "sandbox" {
						sbs[t] = true
					}
				}
			}
		}
		l.checkConditionRefs(ri.Lifecycle, scope{each: hasEach, run: true}, deps, c.runCtx(ri, late))
		ri.DependsOn = slices.Sorted(maps.Keys(deps))
		ri.InputSandboxes = slices.Sorted(maps.Keys(sbs))
		v, diags := ri.InputExpr.Value(c.runCtx(ri, late))
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			continue
		}
		rng := ri.InputExpr.Range()
		if v.ContainsMarked() {
			l.diags = append(l.diags, sensitiveInputDiag(rng))
			continue
		}
		if v.IsNull() {
			l.diags = append(l.diags, inputTypeDiag(rng, fmt.Errorf("it is null")))
			continue
		}
		if _, err := convert.Convert(v, cty.String); err != nil {
			l.diags = append(l.diags, inputTypeDiag(rng, err))
		}
	}
	ctx := buildCtx(c.funcs, c.varsObj, c.localsObj, nil, late)
	for _, name := range slices.Sorted(maps.Keys(c.Outputs)) {
		o := c.Outputs[name]
		if !l.checkRefs(o.Expr, scope{run: true, sandbox: true, where: "an output"}) {
			continue
		}
		v, diags := o.Expr.Value(ctx)
		l.diags = append(l.diags, diags...)
		if !diags.HasErrors() && v.ContainsMarked() && !o.Sensitive {
			l.diags = append(l.diags, sensitiveOutputDiag(o))
		}
	}
}

// ModelProvider is the address of the agent's model provider: its
// provider attribute, else the unaliased openai provider, else the only
// model provider the configuration declares.
func (c *Config) ModelProvider(a *Agent) string {
	if a.Provider != "" {
		return a.Provider
	}
	openai := addrs.Provider{Type: "openai"}.String()
	if _, ok := c.Providers["openai"]; ok {
		return openai
	}
	var only string
	n := 0
	for _, p := range c.Providers {
		if p.Role == registry.RoleModel {
			only = p.Addr
			n++
		}
	}
	if n == 1 {
		return only
	}
	return openai
}

// Registry returns the provider types the configuration was loaded with
// (Options.Registry): the engine builds its providers with them. It is
// nil for a nil Config (commands that only read the state).
func (c *Config) Registry() *registry.Registry {
	if c == nil {
		return nil
	}
	return c.registry
}
