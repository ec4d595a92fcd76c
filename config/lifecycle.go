package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Lifecycle is a run's or sandbox's lifecycle block: its preconditions,
// checked before it runs, and postconditions, checked on its result, as
// Terraform's custom conditions.
type Lifecycle struct {
	Preconditions  []*Condition
	Postconditions []*Condition
}

// Condition is one precondition or postcondition block.
type Condition struct {
	Kind         string // "precondition" | "postcondition"
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

var lifecycleSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "precondition"}, {Type: "postcondition"}}}

var conditionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "condition", Required: true}, {Name: "error_message", Required: true},
}}

// runSelfAttrs are the attributes of self in a run's postcondition.
var runSelfAttrs = []string{"output", "usage", "status"}

// decodeLifecycle decodes the lifecycle blocks of a run or sandbox
// (owner, for messages): one block at most, of precondition and
// postcondition blocks.
func (l *loader) decodeLifecycle(blocks hcl.Blocks, owner string) *Lifecycle {
	if len(blocks) == 0 {
		return nil
	}
	for _, b := range blocks[1:] {
		l.errorf(b.DefRange, "Duplicate lifecycle block", "A %s may have one lifecycle block; the first is at %s.", owner, rangeString(blocks[0].DefRange))
	}
	content, diags := blocks[0].Body.Content(lifecycleSchema)
	l.diags = append(l.diags, diags...)
	lc := &Lifecycle{}
	for _, b := range content.Blocks {
		cc, diags := b.Body.Content(conditionSchema)
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			continue
		}
		c := &Condition{Kind: b.Type, Condition: cc.Attributes["condition"].Expr, ErrorMessage: cc.Attributes["error_message"].Expr, DeclRange: b.DefRange}
		if b.Type == "precondition" {
			lc.Preconditions = append(lc.Preconditions, c)
		} else {
			lc.Postconditions = append(lc.Postconditions, c)
		}
	}
	return lc
}

// checkConditionRefs checks the references of a run's conditions (sc is
// the scope of a precondition): self only in a postcondition, with the
// attributes self has there. Run outputs the conditions refer to are
// added to deps.
func (l *loader) checkConditionRefs(lc *Lifecycle, sc scope, deps map[string]bool, ctx *hcl.EvalContext) {
	if lc == nil {
		return
	}
	ctx.Variables["self"] = cty.DynamicVal
	for _, c := range append(append([]*Condition{}, lc.Preconditions...), lc.Postconditions...) {
		for _, expr := range []hcl.Expression{c.Condition, c.ErrorMessage} {
			for _, tr := range expr.Variables() {
				if tr.RootName() != "self" {
					if l.checkTraversal(tr, scope{each: sc.each, run: sc.run, where: "a " + c.Kind}) && tr.RootName() == "run" {
						for _, t := range l.traversalTargets(tr, false) {
							deps[t] = true
						}
					}
					continue
				}
				l.checkSelf(tr, c.Kind)
			}
			// Unknown functions and wrong argument types show now.
			_, diags := expr.Value(ctx)
			l.diags = append(l.diags, diags...)
		}
	}
}

// checkSelf checks a reference to self in a run condition.
func (l *loader) checkSelf(tr hcl.Traversal, kind string) {
	if kind == "precondition" {
		l.errorf(tr.SourceRange(), "Invalid reference to self", "self is the run's result, known only once it has run: use it in a postcondition, not a precondition.")
		return
	}
	name, nrng, ok := stepName(tr, 1)
	if !ok || !oneOf(name, runSelfAttrs...) {
		l.errorf(hcl.RangeBetween(tr.SourceRange(), nrng), "Invalid attribute of self", "In a run's postcondition self has %s.%s", quoteList(runSelfAttrs), suggest(name, runSelfAttrs))
	}
}

// checkSandboxConditions checks a sandbox's lifecycle: its preconditions
// see only var, local and each, all known when the configuration loads,
// so they are evaluated now; postconditions are refused.
func (l *loader) checkSandboxConditions(lc *Lifecycle, si *SandboxInstance, each *eachVal) {
	if lc == nil {
		return
	}
	for _, c := range lc.Postconditions {
		l.errorf(c.DeclRange, "Sandbox postcondition not supported yet", "A sandbox's lifecycle takes preconditions only for now; check what a run needs of the sandbox in the run's postcondition, or remove this block.")
	}
	sc := scope{each: each != nil, where: "a sandbox precondition"}
	for _, c := range lc.Preconditions {
		if !l.checkRefs(c.Condition, sc) || !l.checkRefs(c.ErrorMessage, sc) {
			continue
		}
		if d := evalCondition(c, l.ctx(c.Condition, each, nil), l.ctx(c.ErrorMessage, each, nil), si.Addr); d != nil {
			l.diags = append(l.diags, d)
		}
	}
}

// CheckRunConditions evaluates the preconditions (kind "precondition") or
// postconditions of a run with the outputs in rv and, for postconditions,
// self. It returns a located diagnostic for each failed or invalid
// condition, and whether some condition could not be decided because a
// value it refers to is not known yet (a precondition over a run that has
// not completed).
func (c *Config) CheckRunConditions(ri *RunInstance, kind string, rv RuntimeValues, self cty.Value) (hcl.Diagnostics, bool) {
	if ri.Lifecycle == nil {
		return nil, false
	}
	conds := ri.Lifecycle.Preconditions
	if kind == "postcondition" {
		conds = ri.Lifecycle.Postconditions
	}
	var diags hcl.Diagnostics
	unknown := false
	for _, cond := range conds {
		ctx := c.runCtx(ri, c.lateObjectsOf(&rv, referencedLate(cond.Condition)))
		if self != cty.NilVal {
			ctx.Variables["self"] = self
		}
		d := evalCondition(cond, ctx, ctx, ri.Addr)
		if d == errUnknownCondition {
			unknown = true
			continue
		}
		if d != nil {
			diags = append(diags, d)
		}
	}
	return diags, unknown
}

// errUnknownCondition marks a condition whose value is not known yet.
var errUnknownCondition = &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "condition not known yet"}

// evalCondition evaluates one condition of owner (an address): nil when
// it holds, errUnknownCondition when it cannot be decided yet, else a
// diagnostic at the condition with its error_message.
func evalCondition(c *Condition, ctx, msgCtx *hcl.EvalContext, owner string) *hcl.Diagnostic {
	rng := c.Condition.Range()
	v, diags := c.Condition.Value(ctx)
	if diags.HasErrors() {
		return diags[0]
	}
	if !v.IsWhollyKnown() {
		return errUnknownCondition
	}
	v, _ = v.Unmark()
	b, err := convert.Convert(v, cty.Bool)
	if err != nil || b.IsNull() {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid condition result", Subject: &rng,
			Detail: fmt.Sprintf("The condition of %s's %s must be true or false, not %s.", owner, c.Kind, typeName(v))}
	}
	if b.True() {
		return nil
	}
	msg := "(its error_message could not be evaluated)"
	if m, diags := c.ErrorMessage.Value(msgCtx); !diags.HasErrors() && m.IsWhollyKnown() && !m.IsNull() {
		if m.ContainsMarked() {
			msg = "(its error_message refers to a sensitive value and is not shown)"
		} else if s, err := convert.Convert(m, cty.String); err == nil {
			msg = s.AsString()
		}
	}
	title := strings.ToUpper(c.Kind[:1]) + c.Kind[1:]
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: title + " failed", Subject: &rng,
		Detail: fmt.Sprintf("%s: %s", owner, msg)}
}

// typeName names v's type for messages.
func typeName(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	return v.Type().FriendlyName()
}
