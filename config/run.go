package config

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

var runSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "agent", Required: true}, {Name: "input", Required: true}, {Name: "sandbox"},
	{Name: "max_turns"}, {Name: "depends_on"}, {Name: "for_each"}, {Name: "continue"}, {Name: "guardrails"},
}, Blocks: []hcl.BlockHeaderSchema{{Type: "budget"}, {Type: "lifecycle"}, {Type: "hook", LabelNames: []string{"event"}}}}

func (l *loader) decodeRun(b *hcl.Block) {
	name := b.Labels[0]
	r := &Run{Name: name, DeclRange: b.DefRange}
	l.cfg.Runs[name] = r
	content, diags := b.Body.Content(runSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	attrs := content.Attributes
	agent, ok := l.namedRef(attrs["agent"].Expr, "agent", "agent")
	if !ok {
		return
	}
	instances := []eachVal{{}}
	if a, ok := attrs["for_each"]; ok {
		r.ForEach = a.Expr
		if instances, ok = l.forEach(a); !ok {
			return
		}
	}
	budgets := content.Blocks.OfType("budget")
	for _, bb := range budgets[min(1, len(budgets)):] {
		l.errorf(bb.DefRange, "Duplicate budget block", "A run may have one budget block; the first is at %s.", rangeString(budgets[0].DefRange))
	}
	lifecycle := l.decodeLifecycle(content.Blocks.OfType("lifecycle"), "run")
	guardrails := l.guardrailRefs(attrs["guardrails"])
	var depends []hcl.Traversal
	if a, ok := attrs["depends_on"]; ok {
		exprs, diags := hcl.ExprList(a.Expr)
		l.diags = append(l.diags, diags...)
		for _, e := range exprs {
			tr, diags := hcl.AbsTraversalForExpr(e)
			if diags.HasErrors() || !oneOf(tr.RootName(), "run", "sandbox") {
				l.errorf(e.Range(), "Invalid depends_on reference", "depends_on lists runs and sandboxes, like [run.NAME, sandbox.NAME], without quotes.")
				continue
			}
			depends = append(depends, tr)
		}
	}
	for _, ev := range instances {
		var each *eachVal
		if r.ForEach != nil {
			e := ev
			each = &e
		}
		ri := &RunInstance{
			Addr: instanceAddr("run", name, ev.key, r.ForEach != nil), Name: name, Key: ev.key,
			Agent: agent, InputExpr: attrs["input"].Expr, DeclRange: b.DefRange, Lifecycle: lifecycle, Guardrails: guardrails,
		}
		if each != nil {
			ri.eachValue = ev.value
		}
		if a, ok := attrs["sandbox"]; ok {
			ri.Sandbox, _ = l.sandboxRef(a, each)
			ri.sandboxSet = true
		}
		ri.continueAttr = attrs["continue"]
		if a, ok := attrs["max_turns"]; ok {
			if v, good := l.eval(a.Expr, scope{each: each != nil, where: "max_turns"}, each, nil); good {
				if n, good := l.toInt(v, a.Expr.Range(), "max_turns"); good {
					if n < 1 {
						l.errorf(a.Expr.Range(), "Invalid max_turns", "max_turns must be at least 1, got %d.", n)
					}
					ri.MaxTurns = n
				}
			}
		}
		for _, hb := range content.Blocks.OfType("hook") {
			if h := l.decodeHook(hb, "run", scope{each: each != nil}, each); h != nil {
				ri.Hooks = append(ri.Hooks, h)
			}
		}
		if len(budgets) > 0 {
			ri.Budget = l.decodeBudget(budgets[0], "run", each)
		}
		l.dependsOn[ri.Addr] = depends
		l.cfg.RunInstances[ri.Addr] = ri
	}
}

// traversalTargets resolves a run.* or sandbox.* traversal to the
// instance addresses it designates: one instance when a literal key is
// given, every instance of the block otherwise. With report, unknown
// names and keys are errors (for depends_on).
func (l *loader) traversalTargets(tr hcl.Traversal, report bool) []string {
	kind := tr.RootName()
	name, nrng, ok := stepName(tr, 1)
	if !ok {
		return nil
	}
	if !l.declared(kind, name) {
		if report {
			l.errorf(hcl.RangeBetween(tr[0].SourceRange(), nrng), "Reference to undeclared "+kind, "There is no %s named %q.%s", kind, name, suggest(name, l.declaredNames(kind)))
		}
		return nil
	}
	var all []string
	if kind == "run" {
		for addr, ri := range l.cfg.RunInstances {
			if ri.Name == name {
				all = append(all, addr)
			}
		}
	} else {
		for addr, si := range l.cfg.SandboxInstances {
			if si.Name == name {
				all = append(all, addr)
			}
		}
	}
	sort.Strings(all)
	if len(tr) > 2 {
		if ix, ok := tr[2].(hcl.TraverseIndex); ok && ix.Key.Type() == cty.String {
			addr := fmt.Sprintf("%s.%s[%q]", kind, name, ix.Key.AsString())
			if oneOf(addr, all...) {
				return []string{addr}
			}
			if report {
				l.errorf(tr.SourceRange(), "Invalid instance key", "%s.%s has no instance %q.", kind, name, ix.Key.AsString())
			}
			return nil
		}
	}
	return all
}
