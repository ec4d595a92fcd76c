// Package registrytest decodes provider settings from HCL source for the
// provider types' tests, the same way for every type. Used by tests only.
package registrytest

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/agentctl/agentctl/providers/registry"
)

// Body parses src as a block's body in a file main.hcl, failing tb on a
// syntax error.
func Body(tb testing.TB, src string) hcl.Body {
	tb.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "main.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		tb.Fatal(diags)
	}
	return f.Body
}

// Sandbox decodes src as the body of sandbox.a with decode (a provider
// type's DecodeSandbox) and the common arguments in args: its settings,
// or its diagnostics as the error.
func Sandbox[T any](tb testing.TB, decode func(*registry.SandboxArgs) (any, hcl.Diagnostics), src string, args registry.SandboxArgs) (T, error) {
	tb.Helper()
	args.Address, args.Body = "sandbox.a", Body(tb, src)
	st, diags := decode(&args)
	if diags.HasErrors() {
		var zero T
		return zero, diags
	}
	return st.(T), nil
}
