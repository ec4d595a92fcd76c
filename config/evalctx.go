package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// EvalContext is a context to evaluate expressions written beside the
// configuration (agentctl test's assertions): var and local, and the
// configuration's functions, with extra variables and functions added.
func (c *Config) EvalContext(vars map[string]cty.Value, funcs map[string]function.Function) *hcl.EvalContext {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: map[string]function.Function{}}
	for k, f := range c.funcs {
		ctx.Functions[k] = f
	}
	for k, f := range funcs {
		ctx.Functions[k] = f
	}
	if c.varsObj != cty.NilVal {
		ctx.Variables["var"] = c.varsObj
	}
	if c.localsObj != cty.NilVal {
		ctx.Variables["local"] = c.localsObj
	}
	for k, v := range vars {
		ctx.Variables[k] = v
	}
	return ctx
}
