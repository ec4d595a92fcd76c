//go:build unix

package local

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/providers/registry/registrytest"
	"github.com/agentctl/agentctl/sandbox"
)

func TestDecodeProvider(t *testing.T) {
	s, diags := DecodeProvider(hcl.EmptyBody())
	if diags.HasErrors() || s.(*ProviderSettings).Isolation != "namespaces" {
		t.Errorf("default: %+v %v", s, diags)
	}
	s, diags = DecodeProvider(registrytest.Body(t, `isolation = "none"`))
	if diags.HasErrors() || s.(*ProviderSettings).Isolation != "none" {
		t.Errorf("none: %+v %v", s, diags)
	}
	if _, diags = DecodeProvider(registrytest.Body(t, `isolation = "namespace"`)); !strings.Contains(diags.Error(), `main.hcl:1,13-24: Invalid isolation`) ||
		!strings.Contains(diags.Error(), `Did you mean "namespaces"?`) {
		t.Errorf("typo: %v", diags)
	}
}

func TestDecodeSandbox(t *testing.T) {
	rng := hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 7}}
	none := &ProviderSettings{Isolation: "none"}
	for _, tc := range []struct {
		args registry.SandboxArgs
		want string
	}{
		{registry.SandboxArgs{ImageRange: &rng}, "has no image"},
		{registry.SandboxArgs{Network: "bridge", NetworkRange: &rng, NetworkValue: rng}, `must be "none" or "host", not "bridge"`},
		{registry.SandboxArgs{ResourceRanges: map[string]hcl.Range{"disk": rng}}, "does not limit a sandbox's disk use"},
		{registry.SandboxArgs{Provider: none, Resources: sandbox.Resources{MemoryMB: 64}, ResourceRanges: map[string]hcl.Range{"memory": rng}}, "does not limit their memory"},
		{registry.SandboxArgs{Provider: none, ResourceRanges: map[string]hcl.Range{"pids": rng}}, `With isolation = "none"`},
	} {
		tc.args.Body = registrytest.Body(t, "")
		_, diags := DecodeSandbox(&tc.args)
		if !strings.Contains(diags.Error(), "main.hcl:7,") || !strings.Contains(diags.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.args, diags, tc.want)
		}
	}
	args := registry.SandboxArgs{Body: registrytest.Body(t, ""), Provider: &ProviderSettings{Isolation: "namespaces"}, ResourceRanges: map[string]hcl.Range{"pids": rng}}
	if s, diags := DecodeSandbox(&args); diags.HasErrors() || s == nil {
		t.Errorf("pids with namespaces: %v %v", s, diags)
	}
	// memory with namespaces: accepted where this machine's cgroups
	// enforce it, refused with the reason where they do not.
	args = registry.SandboxArgs{Body: registrytest.Body(t, ""), Resources: sandbox.Resources{MemoryMB: 64}, ResourceRanges: map[string]hcl.Range{"memory": rng}}
	_, diags := DecodeSandbox(&args)
	if err := CheckResources(IsolationNamespaces, sandbox.Resources{MemoryMB: 64}); err == nil {
		if diags.HasErrors() {
			t.Errorf("memory where cgroups enforce it: %v", diags)
		}
	} else if !strings.Contains(diags.Error(), "cannot on this machine: "+err.Error()) {
		t.Errorf("memory where cgroups cannot enforce it: %v, want the reason %q", diags, err)
	}
	args = registry.SandboxArgs{Body: registrytest.Body(t, `user = "x"`)}
	if _, diags := DecodeSandbox(&args); !strings.Contains(diags.Error(), "Unsupported argument") {
		t.Errorf("argument: %v", diags)
	}
}
