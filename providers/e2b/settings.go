package e2b

import (
	"context"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// Defaults.
const (
	// DefaultRoot is the workspace root when the manifest sets none: in
	// the home of the user E2B's templates run commands as.
	DefaultRoot = "/home/user/workspace"
	// DefaultTemplate is E2B's base template.
	DefaultTemplate = "base"
	// DefaultTimeout is the sandbox's time to live without activity: E2B
	// kills (or pauses) a sandbox agentctl has not used for this long.
	DefaultTimeout = time.Hour
	// MaxTimeout is the longest time to live E2B grants (on its Pro
	// plan; the Hobby plan's is 1h).
	MaxTimeout = 24 * time.Hour
)

// ProviderSettings are the arguments of a provider "e2b" block; empty
// ones come from the environment (E2B_API_KEY, E2B_DOMAIN).
type ProviderSettings struct {
	APIKey string `hcl:"api_key,optional"`
	Domain string `hcl:"domain,optional"`
}

// Secrets implements registry.Secrets.
func (s *ProviderSettings) Secrets() []string { return []string{s.APIKey} }

// Settings are an E2B sandbox's own arguments, decoded and checked. Their
// JSON encoding takes part in the sandbox's configuration digest.
type Settings struct {
	// Commit takes a persistent E2B snapshot of the whole sandbox with
	// each workspace snapshot (commit_snapshot).
	Commit *bool `json:"commit_snapshot,omitempty"`
	// Env is set in the sandbox's environment at create (envVars).
	Env      map[string]string `json:"env,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// OnTimeout is "kill" (default) or "pause": what E2B does when the
	// timeout passes without agentctl using the sandbox.
	OnTimeout string  `json:"on_timeout,omitempty"`
	Template  *string `json:"template,omitempty"`
	// Timeout is the time to live without activity (DefaultTimeout).
	Timeout time.Duration `json:"timeout,omitempty"`
}

func (s *Settings) template() string {
	if s == nil || s.Template == nil || *s.Template == "" {
		return DefaultTemplate
	}
	return *s.Template
}

func (s *Settings) timeout() time.Duration {
	if s == nil || s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

type sandboxArgs struct {
	Template       *string           `hcl:"template,optional"`
	CommitSnapshot *bool             `hcl:"commit_snapshot,optional"`
	Env            map[string]string `hcl:"env,optional"`
	Metadata       map[string]string `hcl:"metadata,optional"`
	Timeout        *string           `hcl:"timeout,optional"`
	OnTimeout      *string           `hcl:"on_timeout,optional"`
}

var (
	schemaOnce       = hosted.Lazy[*hcl.BodySchema]{Build: buildSandboxSchema}
	templateNameOnce = hosted.Lazy[*regexp.Regexp]{Build: compileTemplateName}
)

func buildSandboxSchema() *hcl.BodySchema {
	sc, _ := gohcl.ImpliedBodySchema(&sandboxArgs{})
	return sc
}

func compileTemplateName() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:-]*$`)
}

func sandboxSchema() *hcl.BodySchema { return schemaOnce.Get() }
func templateName() *regexp.Regexp   { return templateNameOnce.Get() }

// DecodeSandbox decodes and checks an E2B sandbox's arguments
// (registry.Type.DecodeSandbox) with what E2B cannot do: an image (E2B
// creates sandboxes from templates built beforehand), resources (a
// template fixes them), networks other than "none".
func DecodeSandbox(args *registry.SandboxArgs) (any, hcl.Diagnostics) {
	diags := refusals(args)
	content, ds := args.Body.Content(sandboxSchema())
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return nil, diags
	}
	attrs := content.Attributes
	var a sandboxArgs
	st := &Settings{}
	if registry.Attr(attrs, "template", &a.Template, &diags) {
		if !templateName().MatchString(*a.Template) {
			diags = append(diags, registry.Errorf(attrs["template"].Expr.Range(), "Invalid template",
				"%q is not an E2B template: use a template's name or id, such as \"base\" or \"my-team/python:v2\".", *a.Template))
		}
		st.Template = a.Template
	}
	if registry.Attr(attrs, "commit_snapshot", &a.CommitSnapshot, &diags) {
		st.Commit = a.CommitSnapshot
	}
	if registry.Attr(attrs, "env", &a.Env, &diags) {
		for k := range a.Env {
			if !sandbox.ValidEnvName(k) {
				diags = append(diags, registry.Errorf(attrs["env"].Expr.Range(), "Invalid environment variable name", "%q is not a variable name: use letters, digits and _, not starting with a digit.", k))
			}
		}
		st.Env = a.Env
	}
	if registry.Attr(attrs, "metadata", &a.Metadata, &diags) {
		for k := range a.Metadata {
			if strings.HasPrefix(k, "dev.agentctl.") {
				diags = append(diags, registry.Errorf(attrs["metadata"].Expr.Range(), "Reserved metadata key", "%q is reserved: agentctl labels the sandboxes it creates with dev.agentctl.* keys. Use another key.", k))
			}
		}
		st.Metadata = a.Metadata
	}
	if d, ok := registry.Duration(attrs, "timeout", &diags); ok {
		if d < time.Minute || d > MaxTimeout {
			diags = append(diags, registry.Errorf(attrs["timeout"].Expr.Range(), "Invalid timeout",
				"timeout is how long E2B keeps a sandbox agentctl does not use; it must be between 1m and %s (E2B's longest), got %s.", MaxTimeout, d))
		}
		st.Timeout = d
	}
	if registry.Attr(attrs, "on_timeout", &a.OnTimeout, &diags) {
		if *a.OnTimeout != "kill" && *a.OnTimeout != "pause" {
			diags = append(diags, registry.Errorf(attrs["on_timeout"].Expr.Range(), "Invalid on_timeout", "on_timeout must be \"kill\" or \"pause\", got %q.", *a.OnTimeout))
		}
		st.OnTimeout = *a.OnTimeout
	}
	return st, diags
}

// refusals are the common arguments E2B cannot honour, at the argument.
func refusals(args *registry.SandboxArgs) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if args.ImageRange != nil {
		diags = append(diags, registry.Errorf(*args.ImageRange, "Unsupported argument for this provider",
			"E2B creates sandboxes from templates, not images: build a template from the image (e2b template build) and set template = \"NAME\" instead of image."))
	}
	if args.NetworkRange != nil && args.Network != "none" {
		diags = append(diags, registry.Errorf(args.NetworkValue, "Unsupported network for this provider",
			"An E2B sandbox either reaches the internet (leave network unset) or does not (network = \"none\"); %q is neither.", args.Network))
	}
	if args.ResourcesRange != nil && len(args.ResourceRanges) > 0 {
		diags = append(diags, registry.Unenforced(args, map[string]string{
			"cpus":   "An E2B sandbox gets the CPUs of its template: set them when building the template (--cpu-count). Remove cpus.",
			"memory": "An E2B sandbox gets the memory of its template: set it when building the template (--memory-mb). Remove memory.",
			"disk":   "An E2B sandbox gets the disk of its template. Remove disk.",
			"pids":   "E2B does not limit a sandbox's processes. Remove pids.",
			"gpus":   "E2B sandboxes have no GPUs. Remove gpus.",
		})...)
	}
	return diags
}

// DecodeProvider decodes a provider "e2b" block.
func DecodeProvider(body hcl.Body) (any, hcl.Diagnostics) {
	return hosted.DecodeProvider[ProviderSettings](body)
}

// Type is the e2b provider type.
func Type() *registry.Type {
	return &registry.Type{
		Name: "e2b", Role: registry.RoleSandbox, DefaultRoot: DefaultRoot,
		DecodeProvider: DecodeProvider, SandboxSchema: sandboxSchema(), DecodeSandbox: DecodeSandbox,
		NewSandbox: func(_ context.Context, settings any, env registry.Env) (sandbox.Provider, error) {
			s, err := hosted.ProviderSettings[ProviderSettings](settings)
			if err != nil {
				return nil, err
			}
			return New(Options{APIKey: s.APIKey, Domain: s.Domain, Environ: env.Environ})
		},
	}
}

// settingsOf returns spec's e2b settings (nil when it has none).
func settingsOf(spec sandbox.Spec) (*Settings, error) {
	return hosted.SandboxSettings[Settings](spec)
}
