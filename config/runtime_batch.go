package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// RunInputEvaluator returns a function that evaluates run inputs as
// EvalRunInput does, against one set of runtime values whose run and
// sandbox objects are built once. EvalRunInput builds them on every call,
// which makes evaluating every input of a large configuration quadratic;
// plan evaluates them all against the same state.
func (c *Config) RunInputEvaluator(rv RuntimeValues) func(ri *RunInstance) (string, hcl.Diagnostics) {
	late := c.lateObjects(&rv)
	return func(ri *RunInstance) (string, hcl.Diagnostics) {
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
}
