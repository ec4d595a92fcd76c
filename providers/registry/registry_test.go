package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

type settings struct{ Region string }

func modelType(name string) *registry.Type {
	return &registry.Type{
		Name: name, Role: registry.RoleModel,
		DecodeProvider: func(body hcl.Body) (any, hcl.Diagnostics) {
			s := &settings{Region: "eu"}
			content, diags := body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "region"}}})
			registry.Attr(content.Attributes, "region", &s.Region, &diags)
			return s, diags
		},
		NewModel: func(context.Context, any, registry.Env) (model.Model, error) { return nil, nil },
	}
}

func sandboxType(name string) *registry.Type {
	return &registry.Type{
		Name: name, Role: registry.RoleSandbox,
		DecodeProvider: func(hcl.Body) (any, hcl.Diagnostics) { return nil, nil },
		DecodeSandbox:  func(*registry.SandboxArgs) (any, hcl.Diagnostics) { return nil, nil },
		NewSandbox:     func(context.Context, any, registry.Env) (sandbox.Provider, error) { return nil, nil },
	}
}

func TestRegistry(t *testing.T) {
	r := registry.New(modelType("m2"), sandboxType("s1"), modelType("m1"))
	if got := strings.Join(r.Names(), ","); got != "m2,s1,m1" {
		t.Errorf("Names() = %s, want registration order", got)
	}
	if got := strings.Join(r.Names(registry.RoleModel), ","); got != "m2,m1" {
		t.Errorf("Names(RoleModel) = %s", got)
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Error("Lookup of an unregistered type succeeded")
	}
	s, err := r.Default("m1")
	if err != nil || s.(*settings).Region != "eu" {
		t.Errorf("Default = %+v, %v", s, err)
	}
	if _, err := r.Default("nope"); err == nil {
		t.Error("Default of an unregistered type succeeded")
	}
	for name, bad := range map[string]*registry.Type{
		"duplicate": modelType("m1"),
		"no role":   {Name: "x", DecodeProvider: modelType("x").DecodeProvider},
		"no model":  {Name: "x", Role: registry.RoleModel, DecodeProvider: modelType("x").DecodeProvider},
		"no decode": {Name: "x", Role: registry.RoleSandbox, DecodeProvider: modelType("x").DecodeProvider, NewSandbox: sandboxType("x").NewSandbox},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			r.Register(bad)
		}()
	}
}

func TestDecodeHelpers(t *testing.T) {
	f, diags := hclsyntax.ParseConfig([]byte("d = \"90s\"\nbad = \"soon\"\nneg = \"-1s\"\nn = \"x\"\n"), "main.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	attrs, _ := f.Body.JustAttributes()
	var ds hcl.Diagnostics
	if d, ok := registry.Duration(attrs, "d", &ds); !ok || d.Seconds() != 90 || ds.HasErrors() {
		t.Errorf("d = %v %v %v", d, ok, ds)
	}
	if _, ok := registry.Duration(attrs, "missing", &ds); ok || ds.HasErrors() {
		t.Errorf("missing: %v %v", ok, ds)
	}
	for _, name := range []string{"bad", "neg"} {
		ds = nil
		if _, ok := registry.Duration(attrs, name, &ds); ok || !strings.Contains(ds.Error(), "main.hcl:") || !strings.Contains(ds.Error(), "Invalid duration") {
			t.Errorf("%s: %v %v", name, ok, ds)
		}
	}
	ds = nil
	var n int
	if registry.Attr(attrs, "n", &n, &ds) || !ds.HasErrors() || ds[0].Subject.Start.Line != 4 {
		t.Errorf("n: %v", ds)
	}
	if got := registry.Suggest("snapshott", []string{"snapshot", "image"}); got != ` Did you mean "snapshot"?` {
		t.Errorf("Suggest = %q", got)
	}
}
