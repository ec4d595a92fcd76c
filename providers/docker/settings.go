package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// ProviderSettings are the arguments of a provider "docker" block.
type ProviderSettings struct {
	// Host is the Docker Engine address (default DOCKER_HOST, then the
	// local socket).
	Host string `hcl:"host,optional"`
}

// SandboxSettings are a docker sandbox's own arguments, decoded and
// checked. Their JSON encoding takes part in the sandbox's configuration
// digest: a field left unset is omitted, and the fields are in the order
// of their JSON names (the order of the map the digest was first computed
// from).
type SandboxSettings struct {
	// CapAdd lists capabilities added back on top of DefaultCapabilities,
	// as written (names from Capabilities, any case, with or without CAP_).
	CapAdd []string `json:"cap_add,omitempty"`
	// Commit enables Sandbox.Commit (docker commit) with each snapshot.
	Commit *bool `json:"commit_snapshot,omitempty"`
	// ShmSizeMB is the size of /dev/shm in MiB (unset or 0: DefaultShmSizeMB).
	ShmSizeMB *int64 `json:"shm_size,omitempty"`
	// User is the user commands run as ("uid", "uid:gid" or a name from
	// the image's /etc/passwd); "" is the image's user.
	User *string `json:"user,omitempty"`
}

// CommitSnapshot implements registry.SnapshotCommitter.
func (s *SandboxSettings) CommitSnapshot() bool { return s != nil && s.Commit != nil && *s.Commit }

// user is the configured user, "" for the image's.
func (s *SandboxSettings) user() string {
	if s == nil || s.User == nil {
		return ""
	}
	return *s.User
}

// capabilities are the cap_add names, canonical (upper case, no CAP_).
func (s *SandboxSettings) capabilities() []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.CapAdd))
	for _, n := range s.CapAdd {
		out = append(out, canonicalCap(n))
	}
	return out
}

// shmSizeMB is the size of /dev/shm in MiB.
func (s *SandboxSettings) shmSizeMB() int64 {
	if s == nil || s.ShmSizeMB == nil || *s.ShmSizeMB == 0 {
		return DefaultShmSizeMB
	}
	return *s.ShmSizeMB
}

func canonicalCap(n string) string { return strings.TrimPrefix(strings.ToUpper(n), "CAP_") }

// sandboxSchema lists the docker sandbox arguments.
var sandboxSchema, _ = gohcl.ImpliedBodySchema(&sandboxArgs{})

type sandboxArgs struct {
	User           *string  `hcl:"user,optional"`
	CommitSnapshot *bool    `hcl:"commit_snapshot,optional"`
	CapAdd         []string `hcl:"cap_add,optional"`
	ShmSize        *int64   `hcl:"shm_size,optional"`
}

// unenforced are the resources the docker provider cannot enforce, and why.
var unenforced = map[string]string{
	"disk": "The docker provider does not limit a container's disk use (the engine can only do so on some storage drivers). Remove disk.",
	"gpus": "The docker provider does not assign GPUs. Remove gpus.",
}

// DecodeSandbox decodes and checks a docker sandbox's arguments
// (registry.Type.DecodeSandbox).
func DecodeSandbox(args *registry.SandboxArgs) (any, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if args.Image == "" {
		diags = append(diags, registry.Errorf(args.MissingItemRange, "Missing image", "A docker sandbox needs image = \"...\", for example image = \"python:3.12-slim\"."))
	}
	if args.NetworkRange != nil && args.Network == "" {
		diags = append(diags, registry.Errorf(args.NetworkValue, "Invalid network", "network must be \"none\", \"host\", \"bridge\" or the name of a network."))
	}
	if network := args.Network; len(args.Ports) > 0 && (network == "" || network == "none" || network == "host") {
		desc := fmt.Sprintf("network = %q", network)
		if args.NetworkRange == nil {
			desc = "no network argument (the default is \"none\")"
		}
		diags = append(diags, registry.Errorf(args.PortsRange, "Ports need a container network",
			"%s has ports but %s: Docker publishes ports only from a container network and refuses to create this container. Set network = \"bridge\" (or the name of a Docker network), or remove ports.", args.Address, desc))
	}
	diags = append(diags, registry.Unenforced(args, unenforced)...)
	content, ds := args.Body.Content(sandboxSchema)
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return nil, diags
	}
	attrs := content.Attributes
	var a sandboxArgs
	st := &SandboxSettings{}
	if registry.Attr(attrs, "user", &a.User, &diags) {
		st.User = a.User
	}
	if registry.Attr(attrs, "commit_snapshot", &a.CommitSnapshot, &diags) {
		st.Commit = a.CommitSnapshot
	}
	if registry.Attr(attrs, "cap_add", &a.CapAdd, &diags) {
		rng := attrs["cap_add"].Expr.Range()
		for _, c := range a.CapAdd {
			if name := canonicalCap(c); !slices.Contains(Capabilities, name) {
				diags = append(diags, registry.Errorf(rng, "Invalid cap_add", "%q is not a Linux capability; use names from capabilities(7) without CAP_, for example \"NET_RAW\" or \"SYS_PTRACE\".%s", c, registry.Suggest(name, Capabilities)))
			}
		}
		st.CapAdd = a.CapAdd
	}
	if registry.Attr(attrs, "shm_size", &a.ShmSize, &diags) {
		rng := attrs["shm_size"].Expr.Range()
		switch n := *a.ShmSize; {
		case n < 0:
			diags = append(diags, registry.Errorf(rng, "Invalid shm_size", "shm_size must be 0 or more, got %d.", n))
		case n > 1<<20:
			diags = append(diags, registry.Errorf(rng, "Invalid shm_size", "shm_size is in MiB and must be at most 1048576 (1 TiB), got %d.", n))
		}
		st.ShmSizeMB = a.ShmSize
	}
	return st, diags
}

// DecodeProvider decodes a provider "docker" block
// (registry.Type.DecodeProvider).
func DecodeProvider(body hcl.Body) (any, hcl.Diagnostics) {
	s := &ProviderSettings{}
	diags := gohcl.DecodeBody(body, nil, s)
	return s, diags
}

// Type is the docker provider type; progress lines of image pulls go to
// the environment's Progress.
func Type() *registry.Type {
	return &registry.Type{
		Name: Kind, Role: registry.RoleSandbox, DefaultNetwork: "none",
		DecodeProvider: DecodeProvider, SandboxSchema: sandboxSchema, DecodeSandbox: DecodeSandbox,
		MountSupport: mountSupport,
		NewSandbox: func(ctx context.Context, settings any, env registry.Env) (sandbox.Provider, error) {
			s, ok := settings.(*ProviderSettings)
			if !ok {
				return nil, fmt.Errorf("provider settings are %T, not *docker.ProviderSettings", settings)
			}
			return New(ctx, Options{Host: s.Host, Environ: env.Environ, Progress: env.Progress})
		},
	}
}

// mountSupport allows storage mounts when the Docker Engine runs on this
// machine: the mount is made here and bound into the container, so an
// engine reached over TCP or SSH would not see it.
func mountSupport(provider any) string {
	s, _ := provider.(*ProviderSettings)
	host := ""
	if s != nil {
		host = s.Host
	}
	if host != "" && !strings.HasPrefix(host, "unix://") {
		return fmt.Sprintf("the Docker Engine at %s may run on another machine, which cannot see a mount made on this one; mounts need the local engine (a unix:// host)", host)
	}
	return ""
}
