package daytona

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// ProviderSettings are the arguments of a provider "daytona" block;
// empty ones come from the environment (see Options).
type ProviderSettings struct {
	APIKey         string `hcl:"api_key,optional"`
	JWTToken       string `hcl:"jwt_token,optional"`
	OrganizationID string `hcl:"organization_id,optional"`
	APIURL         string `hcl:"api_url,optional"`
	Target         string `hcl:"target,optional"`
}

// Secrets implements registry.Secrets.
func (s *ProviderSettings) Secrets() []string { return []string{s.APIKey, s.JWTToken} }

// Settings are a Daytona sandbox's own arguments, decoded and checked.
// Their JSON encoding takes part in the sandbox's configuration digest: a
// field left unset is omitted, and the fields are in the order of their
// JSON names (the order of the map the digest was first computed from).
// Use the methods for the values in effect.
type Settings struct {
	AutoArchiveInterval *int              `json:"auto_archive_interval,omitempty"`
	AutoDeleteInterval  *int              `json:"auto_delete_interval,omitempty"`
	AutoStopInterval    *int              `json:"auto_stop_interval,omitempty"`
	CreateTimeout       time.Duration     `json:"create_timeout,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	// NetworkAllowList are CIDRs.
	NetworkAllowList []string      `json:"network_allow_list,omitempty"`
	NetworkBlockAll  *bool         `json:"network_block_all,omitempty"`
	Public           *bool         `json:"public,omitempty"`
	Snapshot         *string       `json:"snapshot,omitempty"`
	StartTimeout     time.Duration `json:"start_timeout,omitempty"`
	// PreviewTTL is how long a signed preview URL stays valid (not a
	// configuration argument; tests shorten it).
	PreviewTTL time.Duration `json:"-"`
}

func (s *Settings) snapshot() string {
	if s == nil || s.Snapshot == nil {
		return ""
	}
	return *s.Snapshot
}

func (s *Settings) createTimeout() time.Duration {
	if s == nil || s.CreateTimeout <= 0 {
		return DefaultCreateTimeout
	}
	return s.CreateTimeout
}

func (s *Settings) startTimeout() time.Duration {
	if s == nil || s.StartTimeout <= 0 {
		return DefaultStartTimeout
	}
	return s.StartTimeout
}

func (s *Settings) previewTTL() time.Duration {
	if s == nil || s.PreviewTTL < time.Second {
		return DefaultPreviewTTL
	}
	return s.PreviewTTL
}

func flag(b *bool) bool { return b != nil && *b }

type sandboxArgs struct {
	Snapshot            *string           `hcl:"snapshot,optional"`
	Env                 map[string]string `hcl:"env,optional"`
	Labels              map[string]string `hcl:"labels,optional"`
	AutoStopInterval    *int              `hcl:"auto_stop_interval,optional"`
	AutoArchiveInterval *int              `hcl:"auto_archive_interval,optional"`
	AutoDeleteInterval  *int              `hcl:"auto_delete_interval,optional"`
	NetworkBlockAll     *bool             `hcl:"network_block_all,optional"`
	NetworkAllowList    []string          `hcl:"network_allow_list,optional"`
	Public              *bool             `hcl:"public,optional"`
	CreateTimeout       *string           `hcl:"create_timeout,optional"`
	StartTimeout        *string           `hcl:"start_timeout,optional"`
}

var sandboxSchema, _ = gohcl.ImpliedBodySchema(&sandboxArgs{})

// DecodeSandbox decodes and checks a Daytona sandbox's arguments
// (registry.Type.DecodeSandbox), with the checks that involve the common
// ones: a snapshot excludes image and resources, resources need an image,
// pids are not limited, and only ports 3000-9999 can be previewed.
func DecodeSandbox(args *registry.SandboxArgs) (any, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if args.NetworkRange != nil {
		diags = append(diags, registry.Errorf(*args.NetworkRange, "Unsupported argument for this provider", "Daytona sandboxes configure their network with network_block_all and network_allow_list."))
	}
	if rng, ok := args.ResourceRanges["pids"]; ok {
		diags = append(diags, registry.Errorf(rng, "Unsupported resource for this provider", "Daytona does not limit a sandbox's processes. Remove pids."))
	}
	for _, port := range args.Ports {
		if port < 3000 || port > 9999 {
			diags = append(diags, registry.Errorf(args.PortsRange, "Invalid port for this provider",
				"Port %d can't be previewed: Daytona preview URLs serve ports 3000 to 9999. Use a port in that range.", port))
		}
	}
	content, ds := args.Body.Content(sandboxSchema)
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return nil, diags
	}
	attrs := content.Attributes
	var a sandboxArgs
	st := &Settings{}
	if registry.Attr(attrs, "snapshot", &a.Snapshot, &diags) {
		st.Snapshot = a.Snapshot
		if args.ResourcesRange != nil {
			diags = append(diags, registry.Errorf(*args.ResourcesRange, "Resources with a snapshot", "A Daytona sandbox created from a snapshot gets the snapshot's resources: resources cannot be combined with snapshot. Remove the resources block or the snapshot."))
		}
		if args.Image != "" {
			diags = append(diags, registry.Errorf(attrs["snapshot"].NameRange, "Image with a snapshot", "Set either image or snapshot for a Daytona sandbox, not both."))
		}
	} else if args.Image == "" && args.ResourcesRange != nil && len(args.ResourceRanges) > 0 {
		diags = append(diags, registry.Errorf(*args.ResourcesRange, "Resources without an image",
			"Without image (or snapshot) a Daytona sandbox starts from Daytona's default snapshot, whose resources are fixed: resources need an image. Set image, or remove the resources block."))
	}
	if registry.Attr(attrs, "env", &a.Env, &diags) {
		st.Env = a.Env
	}
	if registry.Attr(attrs, "labels", &a.Labels, &diags) {
		st.Labels = a.Labels
	}
	for _, iv := range []struct {
		name string
		src  **int
		dst  **int
	}{
		{"auto_stop_interval", &a.AutoStopInterval, &st.AutoStopInterval},
		{"auto_archive_interval", &a.AutoArchiveInterval, &st.AutoArchiveInterval},
		{"auto_delete_interval", &a.AutoDeleteInterval, &st.AutoDeleteInterval},
	} {
		if !registry.Attr(attrs, iv.name, iv.src, &diags) {
			continue
		}
		if n := **iv.src; n < intervalMin(iv.name) {
			diags = append(diags, registry.Errorf(attrs[iv.name].Expr.Range(), "Invalid "+iv.name, "%s", intervalDetail(iv.name, n)))
		}
		*iv.dst = *iv.src
	}
	if registry.Attr(attrs, "network_block_all", &a.NetworkBlockAll, &diags) {
		st.NetworkBlockAll = a.NetworkBlockAll
	}
	if registry.Attr(attrs, "public", &a.Public, &diags) {
		st.Public = a.Public
	}
	if registry.Attr(attrs, "network_allow_list", &a.NetworkAllowList, &diags) {
		rng := attrs["network_allow_list"].Expr.Range()
		for _, c := range a.NetworkAllowList {
			if _, _, err := net.ParseCIDR(c); err != nil {
				diags = append(diags, registry.Errorf(rng, "Invalid network_allow_list",
					"%q is not a CIDR; network_allow_list takes CIDRs such as \"10.0.0.0/8\" or \"203.0.113.7/32\".", c))
			}
		}
		st.NetworkAllowList = a.NetworkAllowList
	}
	for _, tv := range []struct {
		name string
		dst  *time.Duration
	}{{"create_timeout", &st.CreateTimeout}, {"start_timeout", &st.StartTimeout}} {
		if d, ok := registry.Duration(attrs, tv.name, &diags); ok {
			if d == 0 {
				diags = append(diags, registry.Errorf(attrs[tv.name].Expr.Range(), "Invalid "+tv.name, "%s must be more than 0, like \"90s\" or \"5m\".", tv.name))
			}
			*tv.dst = d
		}
	}
	return st, diags
}

// intervalMin is the smallest value a Daytona interval setting takes: 0
// disables auto-stop and means Daytona's maximum for auto-archive;
// auto_delete_interval also takes -1, which disables auto-delete (0
// deletes the sandbox as soon as it stops).
func intervalMin(setting string) int {
	if setting == "auto_delete_interval" {
		return -1
	}
	return 0
}

func intervalDetail(setting string, n int) string {
	switch setting {
	case "auto_delete_interval":
		return fmt.Sprintf("auto_delete_interval is in minutes after the sandbox stops and must be -1 (never delete) or more (0 deletes it as soon as it stops), got %d.", n)
	case "auto_archive_interval":
		return fmt.Sprintf("auto_archive_interval is in minutes after the sandbox stops and must be 0 or more (0 means Daytona's maximum), got %d. Only auto_delete_interval takes -1.", n)
	}
	return fmt.Sprintf("%s is in minutes of inactivity and must be 0 or more (0 disables it), got %d. Only auto_delete_interval takes -1.", setting, n)
}

// DecodeProvider decodes a provider "daytona" block
// (registry.Type.DecodeProvider).
func DecodeProvider(body hcl.Body) (any, hcl.Diagnostics) {
	return hosted.DecodeProvider[ProviderSettings](body)
}

// Type is the daytona provider type.
func Type() *registry.Type {
	return &registry.Type{
		Name: "daytona", Role: registry.RoleSandbox, DefaultRoot: DefaultRoot,
		DecodeProvider: DecodeProvider, SandboxSchema: sandboxSchema, DecodeSandbox: DecodeSandbox,
		MountSupport: func(any) string {
			return "a Daytona sandbox runs on Daytona's machines, where a mount made here cannot reach, and the Daytona API agentctl speaks has no volumes that mount a bucket"
		},
		NewSandbox: func(_ context.Context, settings any, env registry.Env) (sandbox.Provider, error) {
			s, err := hosted.ProviderSettings[ProviderSettings](settings)
			if err != nil {
				return nil, err
			}
			return New(Options{APIKey: s.APIKey, JWTToken: s.JWTToken, OrganizationID: s.OrganizationID, APIURL: s.APIURL, Target: s.Target, Environ: env.Environ})
		},
	}
}

// settingsOf returns spec's daytona settings (nil when it has none).
func settingsOf(spec sandbox.Spec) (*Settings, error) {
	return hosted.SandboxSettings[Settings](spec)
}

// allowList is the API's comma-separated network_allow_list.
func (s *Settings) allowList() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.NetworkAllowList, ",")
}
