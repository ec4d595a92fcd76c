package runloop

import (
	"context"
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
	// the home of the user Runloop's default image runs commands as.
	DefaultRoot = "/home/user/workspace"
	// DefaultTimeout is the devbox's keep-alive time: Runloop shuts down
	// a devbox agentctl has not kept alive for this long.
	DefaultTimeout = time.Hour
	// MaxTimeout is Runloop's longest keep-alive time (48 hours).
	MaxTimeout = 48 * time.Hour
)

// ProviderSettings are the arguments of a provider "runloop" block;
// empty ones come from the environment (RUNLOOP_API_KEY,
// RUNLOOP_BASE_URL).
type ProviderSettings struct {
	APIKey  string `hcl:"api_key,optional"`
	BaseURL string `hcl:"base_url,optional"`
}

// Secrets implements registry.Secrets.
func (s *ProviderSettings) Secrets() []string { return []string{s.APIKey} }

// Settings are a Runloop sandbox's own arguments, decoded and checked.
// Their JSON encoding takes part in the sandbox's configuration digest.
type Settings struct {
	Blueprint string `json:"blueprint,omitempty"`
	// Commit takes a Runloop disk snapshot of the devbox with each
	// workspace snapshot (commit_snapshot).
	Commit      bool              `json:"commit_snapshot,omitempty"`
	BlueprintID string            `json:"blueprint_id,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	// Secrets maps environment variable names to Runloop secret names
	// (Runloop injects the values; agentctl never sees them).
	Secrets  map[string]string `json:"secrets,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// ResourceSize is Runloop's resource_size_request (SMALL, ...).
	ResourceSize string `json:"resource_size,omitempty"`
	// Timeout is the keep-alive time (DefaultTimeout).
	Timeout time.Duration `json:"timeout,omitempty"`
	// IdleTimeout, when set, suspends or shuts down (OnIdle) a devbox
	// idle for that long.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	OnIdle      string        `json:"on_idle,omitempty"`
	// Resources are the common resources block (CUSTOM_SIZE).
	Resources sandbox.Resources `json:"resources,omitempty"`
}

func (s *Settings) timeout() time.Duration {
	if s == nil || s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

type sandboxArgs struct {
	Blueprint    *string           `hcl:"blueprint,optional"`
	Commit       *bool             `hcl:"commit_snapshot,optional"`
	BlueprintID  *string           `hcl:"blueprint_id,optional"`
	Env          map[string]string `hcl:"env,optional"`
	Secrets      map[string]string `hcl:"secrets,optional"`
	Metadata     map[string]string `hcl:"metadata,optional"`
	ResourceSize *string           `hcl:"resource_size,optional"`
	Timeout      *string           `hcl:"timeout,optional"`
	IdleTimeout  *string           `hcl:"idle_timeout,optional"`
	OnIdle       *string           `hcl:"on_idle,optional"`
}

var schemaOnce = hosted.Lazy[*hcl.BodySchema]{Build: buildSandboxSchema}

func buildSandboxSchema() *hcl.BodySchema {
	sc, _ := gohcl.ImpliedBodySchema(&sandboxArgs{})
	return sc
}

func sandboxSchema() *hcl.BodySchema { return schemaOnce.Get() }

// resourceSizes are Runloop's named sizes.
var resourceSizes = [...]string{"X_SMALL", "SMALL", "MEDIUM", "LARGE", "X_LARGE", "XX_LARGE"}

// DecodeSandbox decodes and checks a Runloop sandbox's arguments
// (registry.Type.DecodeSandbox) with what Runloop cannot do.
func DecodeSandbox(args *registry.SandboxArgs) (any, hcl.Diagnostics) {
	diags := refusals(args)
	content, ds := args.Body.Content(sandboxSchema())
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return nil, diags
	}
	attrs := content.Attributes
	var a sandboxArgs
	st := &Settings{Resources: args.Resources}
	if registry.Attr(attrs, "blueprint", &a.Blueprint, &diags) {
		st.Blueprint = *a.Blueprint
	}
	if registry.Attr(attrs, "blueprint_id", &a.BlueprintID, &diags) {
		st.BlueprintID = *a.BlueprintID
		if st.Blueprint != "" {
			diags = append(diags, registry.Errorf(attrs["blueprint_id"].Expr.Range(), "Conflicting arguments", "Set blueprint (a name) or blueprint_id, not both."))
		}
	}
	if registry.Attr(attrs, "commit_snapshot", &a.Commit, &diags) {
		st.Commit = *a.Commit
	}
	st.Env = envMap(attrs, "env", &a.Env, &diags)
	st.Secrets = envMap(attrs, "secrets", &a.Secrets, &diags)
	if registry.Attr(attrs, "metadata", &a.Metadata, &diags) {
		for k := range a.Metadata {
			if strings.HasPrefix(k, "dev.agentctl.") {
				diags = append(diags, registry.Errorf(attrs["metadata"].Expr.Range(), "Reserved metadata key", "%q is reserved: agentctl labels the devboxes it creates with dev.agentctl.* keys. Use another key.", k))
			}
		}
		st.Metadata = a.Metadata
	}
	if registry.Attr(attrs, "resource_size", &a.ResourceSize, &diags) {
		st.ResourceSize = *a.ResourceSize
		if !isResourceSize(st.ResourceSize) {
			diags = append(diags, registry.Errorf(attrs["resource_size"].Expr.Range(), "Invalid resource_size", "%q is not a Runloop resource size: use one of %s, or a resources block for a custom size.", st.ResourceSize, strings.Join(resourceSizes[:], ", ")))
		}
		if args.ResourcesRange != nil && len(args.ResourceRanges) > 0 {
			diags = append(diags, registry.Errorf(attrs["resource_size"].Expr.Range(), "Conflicting arguments", "Set resource_size or a resources block (a custom size), not both."))
		}
	}
	diags = append(diags, decodeLifecycle(attrs, &a, st)...)
	return st, diags
}

func envMap(attrs hcl.Attributes, name string, target *map[string]string, diags *hcl.Diagnostics) map[string]string {
	if !registry.Attr(attrs, name, target, diags) {
		return nil
	}
	for k := range *target {
		if !sandbox.ValidEnvName(k) {
			*diags = append(*diags, registry.Errorf(attrs[name].Expr.Range(), "Invalid environment variable name", "%q is not a variable name: use letters, digits and _, not starting with a digit.", k))
		}
	}
	return *target
}

// upper returns s with its first letter in upper case, to begin a
// sentence.
func upper(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func isResourceSize(s string) bool {
	for _, r := range resourceSizes {
		if r == s {
			return true
		}
	}
	return false
}

func decodeLifecycle(attrs hcl.Attributes, a *sandboxArgs, st *Settings) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if d, ok := registry.Duration(attrs, "timeout", &diags); ok {
		if d < time.Minute || d > MaxTimeout {
			diags = append(diags, registry.Errorf(attrs["timeout"].Expr.Range(), "Invalid timeout",
				"timeout is how long Runloop keeps a devbox agentctl does not use; it must be between 1m and %s (Runloop's longest), got %s.", MaxTimeout, d))
		}
		st.Timeout = d
	}
	if d, ok := registry.Duration(attrs, "idle_timeout", &diags); ok {
		if d < time.Minute {
			diags = append(diags, registry.Errorf(attrs["idle_timeout"].Expr.Range(), "Invalid idle_timeout", "idle_timeout must be at least 1m, got %s.", d))
		}
		st.IdleTimeout = d
	}
	if registry.Attr(attrs, "on_idle", &a.OnIdle, &diags) {
		st.OnIdle = *a.OnIdle
		if st.OnIdle != "shutdown" && st.OnIdle != "suspend" {
			diags = append(diags, registry.Errorf(attrs["on_idle"].Expr.Range(), "Invalid on_idle", "on_idle must be \"shutdown\" or \"suspend\", got %q.", st.OnIdle))
		}
		if st.IdleTimeout == 0 {
			diags = append(diags, registry.Errorf(attrs["on_idle"].Expr.Range(), "Missing idle_timeout", "on_idle says what Runloop does after idle_timeout: set idle_timeout too."))
		}
	}
	return diags
}

// refusals are the common arguments Runloop cannot honour, at the
// argument.
func refusals(args *registry.SandboxArgs) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if args.ImageRange != nil {
		diags = append(diags, registry.Errorf(*args.ImageRange, "Unsupported argument for this provider",
			"Runloop creates devboxes from blueprints, not images: build a blueprint from the image (a Dockerfile blueprint) and set blueprint = \"NAME\" instead of image."))
	}
	if args.NetworkRange != nil {
		diags = append(diags, registry.Errorf(args.NetworkValue, "Unsupported network for this provider",
			"Runloop restricts a devbox's network through network policies made in Runloop, which agentctl does not manage; remove network (a devbox reaches the internet)."))
	}
	if args.AccountsRange != nil {
		diags = append(diags, registry.Errorf(*args.AccountsRange, "Unsupported manifest users for this provider",
			"%s: it cannot run commands as the manifest's users and groups. Remove them from the manifest.", upper(noUsers)))
	}
	if args.ResourcesRange != nil && len(args.ResourceRanges) > 0 {
		diags = append(diags, registry.Unenforced(args, map[string]string{
			"pids": "Runloop does not limit a devbox's processes. Remove pids.",
			"gpus": "agentctl does not request GPUs from Runloop. Remove gpus.",
		})...)
		if r, ok := args.ResourceRanges["cpus"]; ok {
			c := args.Resources.CPUs
			if c != 1 && (c < 2 || c > 16 || c != float64(int(c)) || int(c)%2 != 0) {
				diags = append(diags, registry.Errorf(r, "Invalid cpus for this provider", "Runloop's custom sizes have 1 CPU or an even number up to 16, got %g.", c))
			}
		}
		if r, ok := args.ResourceRanges["memory"]; ok {
			gb := args.Resources.MemoryMB / 1024
			if args.Resources.MemoryMB%1024 != 0 || gb > 64 || (gb != 1 && gb%2 != 0) {
				diags = append(diags, registry.Errorf(r, "Invalid memory for this provider", "Runloop's custom sizes have 1 GiB of memory or an even number of GiB up to 64, got %d MiB.", args.Resources.MemoryMB))
			}
		}
		if r, ok := args.ResourceRanges["disk"]; ok {
			d := args.Resources.DiskGB
			if d < 2 || d > 64 || d%2 != 0 {
				diags = append(diags, registry.Errorf(r, "Invalid disk for this provider", "Runloop's custom disks are an even number of GiB from 2 to 64, got %d.", d))
			}
		}
	}
	return diags
}

// DecodeProvider decodes a provider "runloop" block.
func DecodeProvider(body hcl.Body) (any, hcl.Diagnostics) {
	return hosted.DecodeProvider[ProviderSettings](body)
}

// Type is the runloop provider type.
func Type() *registry.Type {
	return &registry.Type{
		Name: "runloop", Role: registry.RoleSandbox, DefaultRoot: DefaultRoot,
		DecodeProvider: DecodeProvider, SandboxSchema: sandboxSchema(), DecodeSandbox: DecodeSandbox,
		NewSandbox: func(_ context.Context, settings any, env registry.Env) (sandbox.Provider, error) {
			s, err := hosted.ProviderSettings[ProviderSettings](settings)
			if err != nil {
				return nil, err
			}
			return New(Options{APIKey: s.APIKey, BaseURL: s.BaseURL, Environ: env.Environ})
		},
	}
}

// settingsOf returns spec's runloop settings (nil when it has none).
func settingsOf(spec sandbox.Spec) (*Settings, error) {
	return hosted.SandboxSettings[Settings](spec)
}
