package config

import (
	"github.com/hashicorp/hcl/v2"
)

var outputSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "value", Required: true}, {Name: "sensitive"}, {Name: "description"},
}}

func (l *loader) decodeOutput(b *hcl.Block) {
	o := &Output{Name: b.Labels[0], DeclRange: b.DefRange}
	content, diags := b.Body.Content(outputSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	o.Expr = content.Attributes["value"].Expr
	if a, ok := content.Attributes["sensitive"]; ok {
		if v, ok := l.eval(a.Expr, scope{where: "an output's sensitive argument"}, nil, nil); ok {
			o.Sensitive, _ = l.toBool(v, a.Expr.Range(), "sensitive")
		}
	}
	if a, ok := content.Attributes["description"]; ok {
		o.Description, _ = l.staticString(a)
	}
	l.cfg.Outputs[o.Name] = o
}
