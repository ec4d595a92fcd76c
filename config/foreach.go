package config

import (
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// forEach evaluates a for_each expression: a map or object (keys, values)
// or a set of strings (each.value = each.key), known at load time.
func (l *loader) forEach(a *hcl.Attribute) ([]eachVal, bool) {
	v, ok := l.eval(a.Expr, scope{where: "for_each (it may refer only to var and local)"}, nil, nil)
	if !ok {
		return nil, false
	}
	rng := a.Expr.Range()
	if v.ContainsMarked() {
		l.errorf(rng, "Invalid for_each argument", "for_each can't use sensitive values: the keys become part of addresses, which are shown and stored.")
		return nil, false
	}
	if !l.known(v, rng, "for_each") {
		return nil, false
	}
	if v.IsNull() {
		l.errorf(rng, "Invalid for_each argument", "for_each must be a map or a set of strings, not null.")
		return nil, false
	}
	var out []eachVal
	ty := v.Type()
	switch {
	case ty.IsMapType() || ty.IsObjectType():
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out = append(out, eachVal{key: k.AsString(), value: e})
		}
	case ty.IsSetType() && ty.ElementType() == cty.String:
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsNull() {
				l.errorf(rng, "Invalid for_each argument", "for_each sets must not contain null.")
				return nil, false
			}
			out = append(out, eachVal{key: e.AsString(), value: e})
		}
	default:
		hint := ""
		if ty.IsListType() || ty.IsTupleType() {
			hint = " Convert a list with toset(...)."
		}
		l.errorf(rng, "Invalid for_each argument", "for_each must be a map or a set of strings, not %s.%s", ty.FriendlyName(), hint)
		return nil, false
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, true
}
