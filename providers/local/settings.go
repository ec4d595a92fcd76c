//go:build unix

package local

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// ProviderSettings are the arguments of a provider "local" block.
type ProviderSettings struct {
	// Isolation is "namespaces" (the default) or "none".
	Isolation string `hcl:"isolation,optional"`
}

// Fingerprint implements registry.Fingerprinter: the isolation decides
// what a local sandbox is.
func (s *ProviderSettings) Fingerprint(string) map[string]any {
	return map[string]any{"isolation": s.Isolation}
}

// SandboxSettings are a local sandbox's own arguments: it has none. Its
// JSON encoding, {}, takes part in the sandbox's configuration digest;
// userNS, derived from the provider's isolation, the manifest's accounts
// and agentctl's user, is not encoded.
type SandboxSettings struct {
	userNS bool
}

// NeedsUserNamespace implements registry.UserNamespacer: an ordinary
// user's namespaced sandbox with manifest users needs the agentctl
// command to run in a user namespace of its own (NeedsUserNamespace).
func (s *SandboxSettings) NeedsUserNamespace() bool { return s.userNS }

var _ registry.UserNamespacer = (*SandboxSettings)(nil)

// DecodeProvider decodes a provider "local" block
// (registry.Type.DecodeProvider).
func DecodeProvider(body hcl.Body) (any, hcl.Diagnostics) {
	s := &ProviderSettings{Isolation: "namespaces"}
	content, diags := body.Content(providerSchema)
	if registry.Attr(content.Attributes, "isolation", &s.Isolation, &diags) {
		if allowed := []string{"namespaces", "none"}; !slices.Contains(allowed, s.Isolation) {
			diags = append(diags, registry.Errorf(content.Attributes["isolation"].Expr.Range(), "Invalid isolation",
				"isolation must be \"namespaces\" or \"none\", not %q.%s", s.Isolation, registry.Suggest(s.Isolation, allowed)))
		}
	}
	return s, diags
}

var providerSchema, _ = gohcl.ImpliedBodySchema(&ProviderSettings{})

// unenforced are the resources the local provider never enforces, and why.
var unenforced = map[string]string{
	"disk": "The local provider does not limit a sandbox's disk use. Remove disk.",
	"gpus": "The local provider does not assign GPUs. Remove gpus.",
}

// DecodeSandbox checks a local sandbox's arguments
// (registry.Type.DecodeSandbox): no image, network "none" or "host", and
// only the resources it enforces.
func DecodeSandbox(args *registry.SandboxArgs) (any, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if args.ImageRange != nil {
		diags = append(diags, registry.Errorf(*args.ImageRange, "Unsupported argument for this provider", "A local sandbox runs on this machine and has no image; remove image or use provider.docker."))
	}
	if args.NetworkRange != nil && args.Network != "none" && args.Network != "host" {
		diags = append(diags, registry.Errorf(args.NetworkValue, "Invalid network", "A local sandbox's network must be \"none\" or \"host\", not %q.", args.Network))
	}
	diags = append(diags, registry.Unenforced(args, unenforced)...)
	isolation := IsolationNamespaces
	if p, ok := args.Provider.(*ProviderSettings); ok && p.Isolation != "" {
		isolation = p.Isolation
	}
	// pids is enforced by the namespaced init, memory and cpus by a cgroup
	// where this machine lets agentctl make one (CheckResources).
	r := args.Resources
	for _, x := range []struct {
		name, what string
		r          sandbox.Resources
	}{
		{"memory", "memory", sandbox.Resources{MemoryMB: r.MemoryMB}},
		{"cpus", "CPU time", sandbox.Resources{CPUs: r.CPUs}},
		{"pids", "processes", sandbox.Resources{PIDs: r.PIDs}},
	} {
		rng, ok := args.ResourceRanges[x.name]
		if !ok {
			continue
		}
		if isolation == IsolationNone {
			diags = append(diags, registry.Errorf(rng, "Unsupported resource for this provider",
				"With isolation = \"none\" the local provider runs commands directly on this machine and does not limit their %s. Remove %s, or use the default isolation \"namespaces\" (docs/local-provider.md says what it enforces where).", x.what, x.name))
			continue
		}
		if err := CheckResources(isolation, x.r); err != nil {
			diags = append(diags, registry.Errorf(rng, "Unsupported resource for this provider",
				"The local provider limits a sandbox's %s with a cgroup of its own, and cannot on this machine: %v. Remove %s, or use provider.docker, which enforces it.", x.what, err, x.name))
		}
	}
	if args.AccountsRange != nil {
		if err := CheckAccounts(isolation, args.Accounts); err != nil {
			diags = append(diags, registry.Errorf(*args.AccountsRange, "Manifest users unsupported here",
				"%s: %v (docs/local-provider.md, \"Users and groups\").", args.Address, err))
		}
	}
	_, ds := args.Body.Content(&hcl.BodySchema{})
	return &SandboxSettings{userNS: NeedsUserNamespace(isolation, args.Accounts)}, append(diags, ds...)
}

// Type is the local provider type.
func Type() *registry.Type {
	return &registry.Type{
		Name: "local", Role: registry.RoleSandbox, DefaultNetwork: "none",
		DecodeProvider: DecodeProvider, SandboxSchema: &hcl.BodySchema{}, DecodeSandbox: DecodeSandbox,
		MountSupport: mountSupport,
		NewSandbox: func(_ context.Context, settings any, _ registry.Env) (sandbox.Provider, error) {
			s, ok := settings.(*ProviderSettings)
			if !ok {
				return nil, fmt.Errorf("local: provider settings are %T, not *local.ProviderSettings", settings)
			}
			return New(Options{Isolation: s.Isolation}), nil
		},
	}
}

// mountSupport allows storage mounts when agentctl runs as root: the
// mount is bound into the sandbox's workspace, which needs the right to
// mount.
func mountSupport(any) string {
	if os.Geteuid() != 0 {
		return "binding a mount into a local sandbox's workspace needs agentctl to run as root, and it runs as uid " + strconv.Itoa(os.Geteuid())
	}
	return ""
}
