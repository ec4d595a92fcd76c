// Package registry is the contract between the configuration, the engine
// and the provider types: a provider type names itself, says whether it
// serves models or sandboxes, decodes its own settings from the
// configuration into typed values with located diagnostics, and builds
// its provider from them. config decodes with a Registry and the engine
// constructs with the same one, so neither imports a concrete provider;
// tests register in-memory types.
//
// Decoders receive bodies whose expressions the configuration already
// evaluates: they read them with gohcl (or hcl.Body.Content and
// gohcl.DecodeExpression) and need no evaluation context.
package registry

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// Role says what a provider type provides.
type Role int

const (
	// RoleModel types answer agents (openai, scripted).
	RoleModel Role = iota + 1
	// RoleSandbox types create sandboxes (local, docker, daytona,
	// kubernetes).
	RoleSandbox
)

// Env is what a constructor may use besides the decoded settings.
type Env struct {
	// Environ is the environment (os.Environ() in production): providers
	// read their credentials' fallbacks from here, never from the process.
	Environ []string
	// Progress reports long operations (image pulls) as lines of text;
	// nil discards them.
	Progress func(line string)
	// Address is the provider's address (provider.openai.ollama).
	Address string
	// Dir is the configuration's directory: settings that name files
	// are relative to it.
	Dir string
	// Transport, when not nil, is how a model provider that calls its
	// model over HTTP builds its client's transport: the engine's record
	// and replay (docs/openai-provider.md, "Record and replay"). A
	// provider that makes no HTTP requests (scripted) ignores it.
	Transport Transport
}

// Transport returns the transport a model provider sends its HTTP
// requests through, given the one it would use otherwise (nil:
// http.DefaultTransport) and its own replay directory ("" when it has
// none; relative paths are resolved against Env.Dir by the provider). The
// result wraps base to record each exchange (apply -record), or answers
// every request from recorded exchanges with no network (replaying: a
// replay directory was given, by the provider or by the engine, which
// overrides it), or is base. An error says why neither can be done (a
// missing cassette, recording while replaying).
type Transport func(base http.RoundTripper, replay string) (rt http.RoundTripper, replaying bool, err error)

// SandboxArgs are a sandbox instance's arguments common to every type,
// already decoded by the configuration, with where they were written, and
// the rest of its body for the type's own arguments.
type SandboxArgs struct {
	// Address is the instance address, e.g. sandbox.review["pricing"].
	Address string
	// Body holds the type-specific arguments (the sandbox body without
	// the common ones). Its expressions are already bound to the
	// configuration's evaluation context.
	Body hcl.Body
	// Provider is the decoded settings of the sandbox's provider block.
	Provider any
	// ProviderAddr is the provider's address (provider.docker.gpu).
	ProviderAddr string

	Image      string
	ImageRange *hcl.Range // the image argument's name; nil when not set
	// Network is "" when the sandbox sets none; NetworkRange is then nil.
	Network      string
	NetworkRange *hcl.Range // the argument's name
	NetworkValue hcl.Range  // the argument's value
	Ports        []int
	PortsRange   hcl.Range
	Resources    sandbox.Resources
	// ResourcesRange is the resources block's header; nil without one.
	ResourcesRange *hcl.Range
	// ResourceRanges are the names of the resources arguments set to
	// more than 0 (a 0 means no limit and is accepted by every type).
	ResourceRanges map[string]hcl.Range
	// MissingItemRange is where a missing argument would go.
	MissingItemRange hcl.Range
	// Accounts are the users and groups the sandbox's manifest declares
	// (sandbox.Spec.Accounts); a type that cannot create them or run
	// commands as them reports it at AccountsRange, the sandbox's
	// manifest argument (nil when the manifest declares none).
	Accounts      sandbox.Accounts
	AccountsRange *hcl.Range
}

// UserNamespacer is implemented by the sandbox settings (DecodeSandbox's
// value) of a sandbox that needs the agentctl command to run in a user
// namespace of its own, which maps the user's subordinate ids
// (internal/userns): a local sandbox with manifest users when agentctl is
// not root.
type UserNamespacer interface {
	NeedsUserNamespace() bool
}

// Type is one provider type.
type Type struct {
	// Name is the type as written in provider "NAME" {} and
	// provider.NAME references.
	Name string
	Role Role
	// DecodeProvider decodes the body of a provider "NAME" {} block (the
	// alias argument removed) into the type's settings value. It is
	// called with hcl.EmptyBody() for an undeclared, unaliased provider,
	// which must then yield the defaults.
	DecodeProvider func(body hcl.Body) (any, hcl.Diagnostics)
	// SandboxSchema lists the type-specific sandbox arguments (sandbox
	// providers only); the configuration uses it to tell an argument of
	// another type from a misspelt one.
	SandboxSchema *hcl.BodySchema
	// DecodeSandbox decodes and checks one sandbox instance's
	// type-specific arguments with the common ones (sandbox providers
	// only). The value becomes sandbox.Spec.Settings.
	DecodeSandbox func(args *SandboxArgs) (any, hcl.Diagnostics)
	// DefaultNetwork is the network of a sandbox that sets none.
	DefaultNetwork string
	// DefaultRoot is the workspace root of a sandbox whose manifest sets
	// none; "" means /workspace.
	DefaultRoot string
	// MountSupport says whether this type's sandboxes can have storage
	// mounts (s3, r2, s3_files and gcs manifest entries; docs/mounts.md)
	// under the provider's decoded settings: "" when they can, otherwise
	// why not, as a sentence. Nil means they cannot.
	MountSupport func(provider any) string
	// NewSandbox builds the provider from its decoded settings (sandbox
	// providers only).
	NewSandbox func(ctx context.Context, settings any, env Env) (sandbox.Provider, error)
	// NewModel builds the model client from its decoded settings (model
	// providers only).
	NewModel func(ctx context.Context, settings any, env Env) (model.Model, error)
	// DecodeHostedTool decodes the body of an agent's tool block whose
	// type = "TYP" names a tool the model's service runs itself (model
	// providers only; nil: the type has no hosted tools). settings are
	// the decoded settings of the agent's provider; typeRange is where
	// the type is written, for a type the provider does not know or
	// cannot offer with these settings.
	DecodeHostedTool func(settings any, typ string, typeRange hcl.Range, body hcl.Body) (model.HostedTool, hcl.Diagnostics)
}

// Registry is a set of provider types. The zero value is empty; it is not
// safe for concurrent registration, and is meant to be filled before use.
type Registry struct {
	types map[string]*Type
	order []string // registration order, for messages
}

// New returns a registry holding types. It panics on a malformed or
// duplicate type, a programming error.
func New(types ...*Type) *Registry {
	r := &Registry{types: map[string]*Type{}}
	for _, t := range types {
		r.Register(t)
	}
	return r
}

// Register adds t. It panics on a malformed or duplicate type, a
// programming error.
func (r *Registry) Register(t *Type) {
	if err := t.check(); err != nil {
		panic(err)
	}
	if r.types == nil {
		r.types = map[string]*Type{}
	}
	if _, dup := r.types[t.Name]; dup {
		panic(fmt.Sprintf("registry: provider type %q registered twice", t.Name))
	}
	r.types[t.Name] = t
	r.order = append(r.order, t.Name)
}

func (t *Type) check() error {
	if t.Name == "" || t.DecodeProvider == nil {
		return fmt.Errorf("registry: provider type %q needs a name and DecodeProvider", t.Name)
	}
	switch t.Role {
	case RoleModel:
		if t.NewModel == nil {
			return fmt.Errorf("registry: model provider type %q needs NewModel", t.Name)
		}
	case RoleSandbox:
		if t.NewSandbox == nil || t.DecodeSandbox == nil {
			return fmt.Errorf("registry: sandbox provider type %q needs NewSandbox and DecodeSandbox", t.Name)
		}
	default:
		return fmt.Errorf("registry: provider type %q has no role", t.Name)
	}
	return nil
}

// Lookup returns the type called name.
func (r *Registry) Lookup(name string) (*Type, bool) {
	t, ok := r.types[name]
	return t, ok
}

// Names lists the registered types in registration order; with roles,
// only those with one of them.
func (r *Registry) Names(roles ...Role) []string {
	var out []string
	for _, n := range r.order {
		if len(roles) == 0 || slices.Contains(roles, r.types[n].Role) {
			out = append(out, n)
		}
	}
	return out
}

// Default returns the settings of an undeclared, unaliased provider of
// type name: its provider block decoded from an empty body.
func (r *Registry) Default(name string) (any, error) {
	t, ok := r.types[name]
	if !ok {
		return nil, fmt.Errorf("there is no provider type %q", name)
	}
	s, diags := t.DecodeProvider(hcl.EmptyBody())
	if diags.HasErrors() {
		return nil, fmt.Errorf("provider type %q has no default configuration: %s", name, diags.Error())
	}
	return s, nil
}

// Optional interfaces of decoded settings values.

// Secrets is implemented by provider settings that hold credentials: the
// configuration scrubs the returned values from every output.
type Secrets interface {
	Secrets() []string
}

// Fingerprinter is implemented by provider settings whose non-secret
// parts determine what the provider does: a change of the returned data
// changes the digests of the agents (for agent, a model provider's data
// about that agent) or sandboxes using the provider.
type Fingerprinter interface {
	Fingerprint(agent string) map[string]any
}

// ScriptRefs is implemented by model provider settings that name agents
// (scripted scripts): the configuration checks each name refers to a
// declared agent.
type ScriptRefs interface {
	ScriptAgents() map[string]hcl.Range
}

// RunRefs is implemented by model provider settings that name run blocks
// (scripted scripts scoped to a run): the configuration checks each name
// refers to a declared run.
type RunRefs interface {
	ScriptRuns() map[string]hcl.Range
}

// RunScoper is implemented by model provider settings that differ for
// some runs (scripted scripts scoped to a run). ForRun returns the
// settings as the run block named run sees them, and whether they differ
// from the provider's own; the engine builds the model of that run's
// agents from them, and digests the run with their fingerprint.
type RunScoper interface {
	ForRun(run string) (settings any, scoped bool)
}

// ChatScoper is implemented by model provider settings that differ for
// some agentctl chat sessions (scripted scripts scoped to a session).
// ForChat returns the settings as the session named session sees them,
// and whether they differ from the provider's own.
type ChatScoper interface {
	ForChat(session string) (settings any, scoped bool)
}

// SettingsSupport is implemented by model provider settings whose API
// accepts only some of an agent's model settings: UnsupportedSetting says
// why the setting name (as an agent's settings block names it) is not
// accepted, as a sentence without its final period, or "" when it is.
type SettingsSupport interface {
	UnsupportedSetting(name string) string
}

// SnapshotCommitter is implemented by sandbox settings that ask for the
// whole sandbox to be committed as an image with each snapshot
// (sandbox.Committer).
type SnapshotCommitter interface {
	CommitSnapshot() bool
}
