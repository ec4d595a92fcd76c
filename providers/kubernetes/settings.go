package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// ProviderSettings are the arguments of a provider "kubernetes" block.
// Empty ones come from the kubeconfig (KUBECONFIG, then ~/.kube/config)
// or, inside a Pod, from the in-cluster configuration.
type ProviderSettings struct {
	// ConfigPath is the kubeconfig file (relative to the configuration's
	// directory; "~/" is the home directory).
	ConfigPath string
	// Context is the kubeconfig context; "" is its current context.
	Context string
	// Namespace is where sandboxes are created; "" is the context's
	// namespace, else "default".
	Namespace string
	// CreateTimeout bounds how long a create waits for its Pod to run.
	CreateTimeout time.Duration
}

type providerArgs struct {
	ConfigPath    *string `hcl:"config_path,optional"`
	Context       *string `hcl:"context,optional"`
	Namespace     *string `hcl:"namespace,optional"`
	CreateTimeout *string `hcl:"create_timeout,optional"`
}

var providerSchema, _ = gohcl.ImpliedBodySchema(&providerArgs{})

// DefaultCreateTimeout bounds a create (scheduling, image pull, start)
// when the provider block sets no create_timeout.
const DefaultCreateTimeout = 5 * time.Minute

// DecodeProvider decodes a provider "kubernetes" block
// (registry.Type.DecodeProvider).
func DecodeProvider(body hcl.Body) (any, hcl.Diagnostics) {
	s := &ProviderSettings{CreateTimeout: DefaultCreateTimeout}
	content, diags := body.Content(providerSchema)
	if diags.HasErrors() {
		return s, diags
	}
	attrs := content.Attributes
	var a providerArgs
	if registry.Attr(attrs, "config_path", &a.ConfigPath, &diags) {
		if *a.ConfigPath == "" {
			diags = append(diags, registry.Errorf(attrs["config_path"].Expr.Range(), "Invalid config_path", "config_path must name a kubeconfig file; remove it to use KUBECONFIG or ~/.kube/config."))
		}
		s.ConfigPath = *a.ConfigPath
	}
	if registry.Attr(attrs, "context", &a.Context, &diags) {
		s.Context = *a.Context
	}
	if registry.Attr(attrs, "namespace", &a.Namespace, &diags) {
		if msg := checkDNSLabel(*a.Namespace); msg != "" {
			diags = append(diags, registry.Errorf(attrs["namespace"].Expr.Range(), "Invalid namespace", "namespace %q %s.", *a.Namespace, msg))
		}
		s.Namespace = *a.Namespace
	}
	if d, ok := registry.Duration(attrs, "create_timeout", &diags); ok {
		if d < time.Second {
			diags = append(diags, registry.Errorf(attrs["create_timeout"].Expr.Range(), "Invalid create_timeout", "create_timeout must be at least 1s."))
		}
		s.CreateTimeout = d
	}
	return s, diags
}

// Fingerprint implements registry.Fingerprinter: the cluster context and
// namespace decide where sandboxes live.
func (s *ProviderSettings) Fingerprint(string) map[string]any {
	return map[string]any{"context": s.Context, "namespace": s.Namespace}
}

// SandboxSettings are a kubernetes sandbox's own arguments, decoded and
// checked. Their JSON encoding takes part in the sandbox's configuration
// digest: a field left unset is omitted.
type SandboxSettings struct {
	NodeSelector map[string]string `json:"node_selector,omitempty"`
	RuntimeClass string            `json:"runtime_class,omitempty"`
	Service      bool              `json:"service,omitempty"`
	Tolerations  []Toleration      `json:"tolerations,omitempty"`
	Volume       *Volume           `json:"volume,omitempty"`
}

// Toleration is one toleration block: the Pod may be scheduled on nodes
// with a matching taint.
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
	// Seconds bounds how long a NoExecute taint is tolerated (nil: for
	// ever).
	Seconds *int64 `json:"seconds,omitempty"`
}

// Volume is the volume block: the workspace lives on a
// PersistentVolumeClaim that outlives the Pod, so on_exit = "stop"
// deletes only the Pod and the next apply mounts the claim again.
type Volume struct {
	StorageClass string `json:"storage_class,omitempty"`
	Size         string `json:"size"`
}

type sandboxArgs struct {
	RuntimeClass *string            `hcl:"runtime_class,optional"`
	NodeSelector *map[string]string `hcl:"node_selector,optional"`
	Service      *bool              `hcl:"service,optional"`
	Tolerations  []tolerationArgs   `hcl:"toleration,block"`
	Volume       []volumeArgs       `hcl:"volume,block"`
}

type tolerationArgs struct {
	Key      *string `hcl:"key,optional"`
	Operator *string `hcl:"operator,optional"`
	Value    *string `hcl:"value,optional"`
	Effect   *string `hcl:"effect,optional"`
	Seconds  *int64  `hcl:"toleration_seconds,optional"`
}

type volumeArgs struct {
	StorageClass *string `hcl:"storage_class,optional"`
	Size         string  `hcl:"size"`
}

// sandboxSchema lists the kubernetes sandbox arguments.
var sandboxSchema, _ = gohcl.ImpliedBodySchema(&sandboxArgs{})

// unenforced are the resources a Pod cannot be held to, and why.
var unenforced = map[string]string{
	"disk": "The kubernetes provider does not limit disk use (Kubernetes enforces ephemeral storage only by evicting the Pod, which would lose the sandbox). Remove disk; a volume block's size sets the workspace claim's size.",
	"pids": "Kubernetes sets the process limit per node (the kubelet's podPidsLimit), not per Pod. Remove pids.",
	"gpus": "The kubernetes provider does not request GPUs. Remove gpus.",
}

// DecodeSandbox decodes and checks a kubernetes sandbox's arguments
// (registry.Type.DecodeSandbox).
func DecodeSandbox(args *registry.SandboxArgs) (any, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if args.Image == "" {
		diags = append(diags, registry.Errorf(args.MissingItemRange, "Missing image", "A kubernetes sandbox needs image = \"...\", an image the cluster's nodes can pull or already have, for example image = \"python:3.12-slim\"."))
	}
	if args.NetworkRange != nil && args.Network != "pod" && args.Network != "bridge" {
		diags = append(diags, registry.Errorf(args.NetworkValue, "Unsupported network",
			"A Pod is always on the cluster's Pod network: network may only be \"pod\" (or \"bridge\", its Docker equivalent), not %q. Remove network; restrict traffic with a NetworkPolicy in the namespace if the cluster enforces them.", args.Network))
	}
	diags = append(diags, registry.Unenforced(args, unenforced)...)
	content, ds := args.Body.Content(sandboxSchema)
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return nil, diags
	}
	attrs := content.Attributes
	st := &SandboxSettings{}
	var a sandboxArgs
	if registry.Attr(attrs, "runtime_class", &a.RuntimeClass, &diags) {
		if msg := checkDNSSubdomain(*a.RuntimeClass); msg != "" {
			diags = append(diags, registry.Errorf(attrs["runtime_class"].Expr.Range(), "Invalid runtime_class", "runtime_class %q %s; it names a RuntimeClass of the cluster (kubectl get runtimeclass), such as \"gvisor\" or \"kata\".", *a.RuntimeClass, msg))
		}
		st.RuntimeClass = *a.RuntimeClass
	}
	if registry.Attr(attrs, "node_selector", &a.NodeSelector, &diags) {
		rng := attrs["node_selector"].Expr.Range()
		for _, k := range slices.Sorted(maps.Keys(*a.NodeSelector)) {
			if msg := checkLabelKey(k); msg != "" {
				diags = append(diags, registry.Errorf(rng, "Invalid node_selector", "node_selector key %q %s.", k, msg))
			}
			if msg := checkLabelValue((*a.NodeSelector)[k]); msg != "" {
				diags = append(diags, registry.Errorf(rng, "Invalid node_selector", "node_selector value %q of %q %s.", (*a.NodeSelector)[k], k, msg))
			}
		}
		if len(*a.NodeSelector) > 0 {
			st.NodeSelector = *a.NodeSelector
		}
	}
	if registry.Attr(attrs, "service", &a.Service, &diags) {
		st.Service = *a.Service
		if st.Service && len(args.Ports) == 0 {
			diags = append(diags, registry.Errorf(attrs["service"].Expr.Range(), "Service without ports", "service = true makes a Service for the sandbox's ports, but %s has no ports. Add ports = [...] or remove service.", args.Address))
		}
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "toleration":
			var t tolerationArgs
			if ds := gohcl.DecodeBody(b.Body, nil, &t); ds.HasErrors() {
				diags = append(diags, ds...)
				continue
			}
			tol := Toleration{Key: deref(t.Key), Operator: deref(t.Operator), Value: deref(t.Value), Effect: deref(t.Effect), Seconds: t.Seconds}
			diags = append(diags, checkToleration(tol, b.DefRange)...)
			st.Tolerations = append(st.Tolerations, tol)
		case "volume":
			if st.Volume != nil {
				diags = append(diags, registry.Errorf(b.DefRange, "Duplicate volume block", "A sandbox has at most one volume block (the workspace's claim)."))
				continue
			}
			var v volumeArgs
			if ds := gohcl.DecodeBody(b.Body, nil, &v); ds.HasErrors() {
				diags = append(diags, ds...)
				continue
			}
			vol := &Volume{Size: v.Size, StorageClass: deref(v.StorageClass)}
			if q, err := resource.ParseQuantity(v.Size); err != nil || q.Sign() <= 0 {
				diags = append(diags, registry.Errorf(b.DefRange, "Invalid volume size", "size must be a positive Kubernetes quantity such as \"1Gi\" or \"500Mi\", not %q.", v.Size))
			}
			if vol.StorageClass != "" {
				if msg := checkDNSSubdomain(vol.StorageClass); msg != "" {
					diags = append(diags, registry.Errorf(b.DefRange, "Invalid storage_class", "storage_class %q %s.", vol.StorageClass, msg))
				}
			}
			st.Volume = vol
		}
	}
	return st, diags
}

var (
	tolerationOperators = []string{"Equal", "Exists"}
	tolerationEffects   = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
)

func checkToleration(t Toleration, rng hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	bad := func(format string, args ...any) {
		diags = append(diags, registry.Errorf(rng, "Invalid toleration", format, args...))
	}
	if t.Operator != "" && !slices.Contains(tolerationOperators, t.Operator) {
		bad("operator must be \"Equal\" or \"Exists\", not %q.%s", t.Operator, registry.Suggest(t.Operator, tolerationOperators))
	}
	if t.Effect != "" && !slices.Contains(tolerationEffects, t.Effect) {
		bad("effect must be \"NoSchedule\", \"PreferNoSchedule\" or \"NoExecute\" (or unset for all), not %q.%s", t.Effect, registry.Suggest(t.Effect, tolerationEffects))
	}
	if t.Operator == "Exists" && t.Value != "" {
		bad("a toleration with operator \"Exists\" takes no value; remove value = %q.", t.Value)
	}
	if t.Key == "" && t.Operator != "Exists" {
		bad("a toleration without a key tolerates every taint and needs operator = \"Exists\".")
	}
	if t.Key != "" {
		if msg := checkLabelKey(t.Key); msg != "" {
			bad("key %q %s.", t.Key, msg)
		}
	}
	if t.Seconds != nil && t.Effect != "NoExecute" {
		bad("toleration_seconds applies only to effect = \"NoExecute\".")
	}
	return diags
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Type is the kubernetes provider type.
func Type() *registry.Type {
	return &registry.Type{
		Name: Kind, Role: registry.RoleSandbox, DefaultNetwork: "pod",
		DecodeProvider: DecodeProvider, SandboxSchema: sandboxSchema, DecodeSandbox: DecodeSandbox,
		MountSupport: func(any) string {
			return "a Pod runs on a cluster node, where a mount made on this machine cannot be bound, and mounting inside the Pod would need a privileged container or a CSI driver on the cluster, which agentctl does not ask of it"
		},
		NewSandbox: func(ctx context.Context, settings any, env registry.Env) (sandbox.Provider, error) {
			s, ok := settings.(*ProviderSettings)
			if !ok {
				return nil, fmt.Errorf("provider settings are %T, not *kubernetes.ProviderSettings", settings)
			}
			cp := s.ConfigPath
			if cp != "" && !strings.HasPrefix(cp, "~/") && !filepath.IsAbs(cp) && env.Dir != "" {
				cp = filepath.Join(env.Dir, cp)
			}
			return New(ctx, Options{
				ConfigPath: cp, Context: s.Context, Namespace: s.Namespace,
				CreateTimeout: s.CreateTimeout, Environ: env.Environ,
			})
		},
	}
}
