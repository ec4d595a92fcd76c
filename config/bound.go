package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// boundBody is a block body whose attribute values the loader evaluates
// with its own evaluation context (variables, locals, functions, each)
// before a provider type's decoder sees them: the decoder gets each value
// as a static expression at the attribute's range and needs no context.
// Attributes whose evaluation fails (already reported), or whose value is
// null, are left out, so null means "not set" as everywhere else.
//
// Sensitive values are refused with an error naming refuse ("A sandbox
// argument"), or, when refuse is "", allowed and recorded for scrubbing
// (provider settings); nested blocks then refuse them with nested.
type boundBody struct {
	l      *loader
	body   hcl.Body
	sc     scope
	each   *eachVal
	refuse string
	nested string
}

var _ hcl.Body = (*boundBody)(nil)

func (b *boundBody) Content(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	c, diags := b.body.Content(schema)
	return b.bind(c, diags)
}

func (b *boundBody) PartialContent(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Body, hcl.Diagnostics) {
	c, remain, diags := b.body.PartialContent(schema)
	c, diags = b.bind(c, diags)
	rb := *b
	rb.body = remain
	return c, &rb, diags
}

func (b *boundBody) JustAttributes() (hcl.Attributes, hcl.Diagnostics) {
	attrs, diags := b.body.JustAttributes()
	c, diags := b.bind(&hcl.BodyContent{Attributes: attrs}, diags)
	return c.Attributes, diags
}

func (b *boundBody) MissingItemRange() hcl.Range { return b.body.MissingItemRange() }

// bind evaluates c's attributes and binds its blocks' bodies; diags are
// returned as they are.
func (b *boundBody) bind(c *hcl.BodyContent, diags hcl.Diagnostics) (*hcl.BodyContent, hcl.Diagnostics) {
	if c == nil {
		return &hcl.BodyContent{Attributes: hcl.Attributes{}}, diags
	}
	out := &hcl.BodyContent{Attributes: hcl.Attributes{}, MissingItemRange: c.MissingItemRange}
	for name, a := range c.Attributes {
		if v, ok := b.value(a); ok {
			ba := *a
			ba.Expr = hcl.StaticExpr(v, a.Expr.Range())
			out.Attributes[name] = &ba
		}
	}
	for _, blk := range c.Blocks {
		bb := *blk
		nb := *b
		nb.body = blk.Body
		if b.refuse == "" {
			nb.refuse = b.nested
		}
		bb.Body = &nb
		out.Blocks = append(out.Blocks, &bb)
	}
	return out, diags
}

// value evaluates a, returning its unmarked value when it is set, known
// and allowed here. A failure is reported by the loader itself (so a
// decoder's own checks of the other arguments still run) and leaves the
// attribute out.
func (b *boundBody) value(a *hcl.Attribute) (cty.Value, bool) {
	l := b.l
	v, ok := l.eval(a.Expr, b.sc, b.each, nil)
	if !ok || !l.known(v, a.Expr.Range(), a.Name) {
		return cty.NilVal, false
	}
	if v.ContainsMarked() {
		if b.refuse != "" {
			l.noSensitive(v, a.Expr.Range(), b.refuse)
			return cty.NilVal, false
		}
		l.col.addValue(v)
		v, _ = v.UnmarkDeep()
	}
	return v, !v.IsNull()
}
