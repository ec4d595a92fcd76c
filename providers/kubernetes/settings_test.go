package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/providers/registry/registrytest"
	"github.com/agentctl/agentctl/sandbox"
)

// decodeSettings decodes src as a sandbox body's arguments with the
// common arguments in args.
func decodeSettings(t *testing.T, src string, args registry.SandboxArgs) (*SandboxSettings, error) {
	if args.Image == "" {
		args.Image = "alpine:3"
	}
	return registrytest.Sandbox[*SandboxSettings](t, DecodeSandbox, src, args)
}

func TestDecodeSandbox(t *testing.T) {
	st, err := decodeSettings(t, `
runtime_class = "gvisor"
node_selector = { "kubernetes.io/arch" = "amd64", pool = "agents" }
service = true
toleration {
  key = "dedicated"
  operator = "Equal"
  value = "agents"
  effect = "NoSchedule"
}
toleration {
  operator = "Exists"
  effect = "NoExecute"
  toleration_seconds = 30
}
volume {
  storage_class = "fast"
  size = "2Gi"
}`, registry.SandboxArgs{Ports: []int{8080}})
	if err != nil {
		t.Fatal(err)
	}
	if st.RuntimeClass != "gvisor" || !st.Service || st.NodeSelector["pool"] != "agents" || len(st.Tolerations) != 2 ||
		st.Tolerations[1].Seconds == nil || *st.Tolerations[1].Seconds != 30 || st.Volume == nil || st.Volume.Size != "2Gi" || st.Volume.StorageClass != "fast" {
		t.Errorf("settings = %+v", st)
	}
	if st, err := decodeSettings(t, ``, registry.SandboxArgs{}); err != nil || st.Service || st.Volume != nil || st.RuntimeClass != "" {
		t.Errorf("defaults: %+v %v", st, err)
	}
}

func TestDecodeSandboxErrors(t *testing.T) {
	for _, c := range []struct {
		src  string
		args registry.SandboxArgs
		want string
	}{
		{`runtime_class = "Not_A_Class"`, registry.SandboxArgs{}, `runtime_class "Not_A_Class" is not valid`},
		{`node_selector = { "bad key!" = "x" }`, registry.SandboxArgs{}, `node_selector key "bad key!" is not valid`},
		{`node_selector = { pool = "no spaces allowed" }`, registry.SandboxArgs{}, `node_selector value "no spaces allowed"`},
		{`service = true`, registry.SandboxArgs{}, "has no ports"},
		{"toleration {\n key = \"k\"\n operator = \"Maybe\"\n}", registry.SandboxArgs{}, `operator must be "Equal" or "Exists"`},
		{"toleration {\n key = \"k\"\n effect = \"NoSchedul\"\n}", registry.SandboxArgs{}, `Did you mean "NoSchedule"?`},
		{"toleration {\n operator = \"Equal\"\n}", registry.SandboxArgs{}, "needs operator = \"Exists\""},
		{"toleration {\n key = \"k\"\n operator = \"Exists\"\n value = \"v\"\n}", registry.SandboxArgs{}, "takes no value"},
		{"toleration {\n key = \"k\"\n toleration_seconds = 5\n}", registry.SandboxArgs{}, "only to effect = \"NoExecute\""},
		{"volume {\n size = \"lots\"\n}", registry.SandboxArgs{}, `size must be a positive Kubernetes quantity`},
		{"volume {\n size = \"0\"\n}", registry.SandboxArgs{}, `size must be a positive Kubernetes quantity`},
		{"volume {\n}", registry.SandboxArgs{}, `"size" is required`},
		{"volume {\n size = \"1Gi\"\n}\nvolume {\n size = \"1Gi\"\n}", registry.SandboxArgs{}, "at most one volume block"},
		{`shm_size = 64`, registry.SandboxArgs{}, `"shm_size" is not expected`},
		{``, registry.SandboxArgs{Network: "none", NetworkRange: &hcl.Range{}}, "always on the cluster's Pod network"},
		{``, registry.SandboxArgs{ResourceRanges: map[string]hcl.Range{"disk": {}}}, "does not limit disk use"},
		{``, registry.SandboxArgs{ResourceRanges: map[string]hcl.Range{"pids": {}}}, "podPidsLimit"},
		{``, registry.SandboxArgs{ResourceRanges: map[string]hcl.Range{"gpus": {}}}, "does not request GPUs"},
	} {
		if _, err := decodeSettings(t, c.src, c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.src, err, c.want)
		}
	}
	for _, network := range []string{"pod", "bridge"} {
		if _, err := decodeSettings(t, ``, registry.SandboxArgs{Network: network, NetworkRange: &hcl.Range{}}); err != nil {
			t.Errorf("network %q: %v", network, err)
		}
	}
	args := registry.SandboxArgs{Address: "sandbox.a", Body: registrytest.Body(t, ``)}
	if _, diags := DecodeSandbox(&args); !diags.HasErrors() || !strings.Contains(diags.Error(), "Missing image") {
		t.Errorf("no image: %v", diags)
	}
}

func TestDecodeProvider(t *testing.T) {
	s, diags := DecodeProvider(registrytest.Body(t, `
config_path = "kube/config"
context = "kind-agents"
namespace = "agents"
create_timeout = "90s"`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ps := s.(*ProviderSettings)
	if ps.ConfigPath != "kube/config" || ps.Context != "kind-agents" || ps.Namespace != "agents" || ps.CreateTimeout != 90*time.Second {
		t.Errorf("settings = %+v", ps)
	}
	if s, diags := DecodeProvider(hcl.EmptyBody()); diags.HasErrors() || s.(*ProviderSettings).CreateTimeout != DefaultCreateTimeout {
		t.Errorf("defaults: %+v %v", s, diags)
	}
	for src, want := range map[string]string{
		`namespace = "Agents_1"`:  `namespace "Agents_1" is not valid`,
		`create_timeout = "soon"`: "must be a duration",
		`create_timeout = "10ms"`: "at least 1s",
		`config_path = ""`:        "must name a kubeconfig file",
		`kubeconfig = "x"`:        `"kubeconfig" is not expected`,
		`namespace = ["a", "b"]`:  "string required",
		`create_timeout = "-5s"`:  "must be a duration",
	} {
		_, diags := DecodeProvider(registrytest.Body(t, src))
		if !diags.HasErrors() || !strings.Contains(diags.Error(), want) {
			t.Errorf("%s: %v, want %q", src, diags, want)
		}
	}
}

// writeKubeconfig writes a kubeconfig for server (no credentials) with
// contexts "one" (namespace ns-one, current) and "two".
func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	p := filepath.Join(dir, "config")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + server + `
users:
- name: u
  user: {}
contexts:
- name: one
  context: {cluster: c, user: u, namespace: ns-one}
- name: two
  context: {cluster: c, user: u}
current-context: one
`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A provider that cannot load its configuration or reach its cluster
// says which kubeconfig it read and how to fix it.
func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	_, err := New(ctx, Options{ConfigPath: filepath.Join(dir, "missing")})
	if err == nil || !strings.Contains(err.Error(), "config_path") || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing config_path: %v", err)
	}
	_, err = New(ctx, Options{Environ: []string{"HOME=" + dir}})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, ".kube", "config")) || !strings.Contains(err.Error(), "set config_path (or KUBECONFIG)") {
		t.Errorf("no kubeconfig: %v", err)
	}
	kc := writeKubeconfig(t, dir, "https://127.0.0.1:1")
	_, err = New(ctx, Options{Environ: []string{"KUBECONFIG=" + kc}})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Kubernetes API server of context one (https://127.0.0.1:1)") {
		t.Errorf("unreachable: %v", err)
	}
	_, err = New(ctx, Options{ConfigPath: kc, Context: "three"})
	if err == nil || !strings.Contains(err.Error(), `"three"`) {
		t.Errorf("unknown context: %v", err)
	}
}

func TestLabels(t *testing.T) {
	spec := sandbox.Spec{Address: `sandbox.review["pricing v2"]`, Lineage: "0b6d7c1e-8f1a-4f35-9a1e-8a1d2c3b4e5f"}
	l := labels(spec)
	if l[sandbox.LabelManaged] != "true" || l[sandbox.LabelLineage] != spec.Lineage {
		t.Errorf("labels = %v", l)
	}
	addr := l[sandbox.LabelAddress]
	if checkLabelValue(addr) != "" || !strings.HasPrefix(addr, "sandbox.review--pricing-v2") {
		t.Errorf("address label %q", addr)
	}
	if other := labelValue(`sandbox.review["pricing-v2"]`); other == addr {
		t.Errorf("two addresses share the label value %q", addr)
	}
	if labelValue("sandbox.box") != "sandbox.box" {
		t.Errorf("a valid value was changed: %q", labelValue("sandbox.box"))
	}
	long := labelValue(strings.Repeat("x", 200))
	if checkLabelValue(long) != "" {
		t.Errorf("long value %q is not a label value", long)
	}
	for _, a := range []string{`sandbox.review["pricing"]`, strings.Repeat("Z", 100), `sandbox.a[0]`, `"`} {
		n := resourceName(a)
		if checkDNSLabel(n) != "" || !strings.HasPrefix(n, "agentctl-") {
			t.Errorf("resourceName(%q) = %q: %s", a, n, checkDNSLabel(n))
		}
	}
}
