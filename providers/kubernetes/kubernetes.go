// Package kubernetes is the Kubernetes sandbox provider: every sandbox is
// one Pod, labelled as agentctl's, whose only container runs an idle
// loop; commands run through the pods/exec subresource, and files travel
// as tar streams over exec, as kubectl cp does. The client is
// k8s.io/client-go's typed core/v1 client alone (docs/kubernetes-provider.md,
// docs/benchmarks-kubernetes.md).
//
// Approach in short:
//
//   - Paths are resolved inside the Pod by a small shell script (symlinks
//     resolved there); a path whose resolution leaves the workspace root
//     is refused with sandbox.ErrPathEscape.
//   - Archives given to CopyIn go through hostfs.SanitizeTar, then to
//     tar -x in the Pod, after a pass that replaces any symlink standing
//     where the archive has a directory (busybox tar would write through
//     it).
//   - Exec timeouts kill the whole process tree: every command carries a
//     random marker in its environment, and a second exec kills every
//     process holding it, as the docker provider does.
//   - The workspace is an emptyDir volume, or with a volume block a
//     PersistentVolumeClaim that outlives the Pod (on_exit = "stop"
//     deletes only the Pod; Start makes a new one mounting the claim).
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// Kind is the provider kind.
const Kind = "kubernetes"

// containerName is the name of the sandbox's container in its Pod.
const containerName = "sandbox"

// idleScript keeps the container alive and exits at once on SIGTERM, so
// deleting the Pod is quick.
const idleScript = `trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done`

// DefaultCapabilities are the only capabilities the container keeps, as
// the docker provider's (docs/sandbox.md, "Hardening defaults").
var DefaultCapabilities = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE", "SETGID", "SETUID"}

// Options configure the provider.
type Options struct {
	// ConfigPath is the kubeconfig; "" is KUBECONFIG from Environ, else
	// ~/.kube/config, else the in-cluster configuration.
	ConfigPath string
	// Context is the kubeconfig context; "" is its current context.
	Context string
	// Namespace overrides the context's namespace.
	Namespace string
	// CreateTimeout bounds a create (DefaultCreateTimeout when 0).
	CreateTimeout time.Duration
	// Environ is where KUBECONFIG and HOME are read; nil is the process
	// environment.
	Environ []string
}

// Provider creates Pods in one namespace.
type Provider struct {
	cfg  *rest.Config
	core *coreClient
	ns   string
	opts Options
	// where describes the cluster for messages (context and server).
	where string
}

var _ sandbox.Provider = (*Provider)(nil)

// New loads the client configuration and checks the API server answers.
// Its errors do not name the provider (the engine does).
func New(ctx context.Context, opts Options) (*Provider, error) {
	env := opts.Environ
	if env == nil {
		env = os.Environ()
	}
	getenv := func(k string) string { return registry.Getenv(env, k) }
	// client-go reports what its stream goroutines see after a command
	// ended (a stdin copy into a closed stream, a port-forward connection
	// the Pod refused) through klog, which writes to the terminal;
	// agentctl gets every failure that matters from the calls themselves.
	klog.SetLogger(logr.Discard())
	rules := &clientcmd.ClientConfigLoadingRules{}
	source := ""
	switch {
	case opts.ConfigPath != "":
		p := opts.ConfigPath
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			p = filepath.Join(getenv("HOME"), rest)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kubeconfig %s (config_path): %w", p, err)
		}
		rules.ExplicitPath = p
		source = p
	case getenv("KUBECONFIG") != "":
		rules.Precedence = filepath.SplitList(getenv("KUBECONFIG"))
		source = "KUBECONFIG=" + getenv("KUBECONFIG")
	default:
		if home := getenv("HOME"); home != "" {
			p := filepath.Join(home, ".kube", "config")
			rules.Precedence = []string{p}
			source = p
		}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: opts.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if source == "" {
			source = "no kubeconfig (HOME is unset) and not running in a Pod"
		}
		return nil, fmt.Errorf("loading the Kubernetes client configuration (%s): %w; set config_path (or KUBECONFIG) to a kubeconfig, or run agentctl in a Pod with a service account", source, err)
	}
	ns := opts.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("reading the namespace of the kubeconfig context: %w", err)
		}
	}
	// agentctl makes a few calls per command; client-go's default of 5
	// requests a second would throttle a busy apply.
	cfg.QPS, cfg.Burst = 50, 100
	core, err := newCoreClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	if opts.CreateTimeout <= 0 {
		opts.CreateTimeout = DefaultCreateTimeout
	}
	where := cfg.Host
	if raw, err := cc.RawConfig(); err == nil {
		c := opts.Context
		if c == "" {
			c = raw.CurrentContext
		}
		if c != "" {
			where = "context " + c + " (" + cfg.Host + ")"
		}
	}
	p := &Provider{cfg: cfg, core: core, ns: ns, opts: opts, where: where}
	if err := core.rc.Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return nil, fmt.Errorf("cannot reach the Kubernetes API server of %s: %w; check the cluster is up and the kubeconfig's credentials", where, err)
	}
	return p, nil
}

// Kind returns "kubernetes".
func (p *Provider) Kind() string { return Kind }

// Namespace is the namespace sandboxes are created in.
func (p *Provider) Namespace() string { return p.ns }

// RESTConfig is the client configuration (tests, diagnostics).
func (p *Provider) RESTConfig() *rest.Config { return rest.CopyConfig(p.cfg) }

// sessionData is SessionState.Data: where the sandbox's objects are and
// what it was made from. Never credentials.
type sessionData struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid,omitempty"`
	Claim     string `json:"claim,omitempty"`
	Service   string `json:"service,omitempty"`
	Image     string `json:"image"`
	// ImageID is what the kubelet reported the container ran (a digest).
	ImageID string `json:"image_id,omitempty"`
	Root    string `json:"root"`
	Ports   []int  `json:"ports,omitempty"`
}

// workspaceRoot is the manifest root as an absolute path.
func workspaceRoot(spec sandbox.Spec) (string, error) {
	root := "/workspace"
	if spec.Root != "" {
		root = path.Clean("/" + spec.Root)
	}
	if root == "/" {
		return "", errors.New("the workspace root cannot be / in a Kubernetes sandbox (it is a volume mounted in the Pod); set the manifest's root to a directory such as /workspace")
	}
	return root, nil
}

func settingsOf(spec sandbox.Spec) (*SandboxSettings, error) {
	if spec.Settings == nil {
		return &SandboxSettings{}, nil
	}
	s, ok := spec.Settings.(*SandboxSettings)
	if !ok {
		return nil, fmt.Errorf("sandbox settings are %T, not *kubernetes.SandboxSettings", spec.Settings)
	}
	return s, nil
}

// Create makes the sandbox's claim (with a volume block), Pod and
// Service (service = true), waits for the Pod to run within the create
// timeout, and creates the manifest's accounts. A Pod that cannot be
// scheduled or whose image cannot be pulled fails at once with its
// events; nothing is left behind on failure.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if len(spec.Mounts) > 0 {
		return nil, errors.New("storage mounts cannot be bound into a Pod (docs/mounts.md)")
	}
	if spec.Image == "" {
		return nil, errors.New("no image; set image = \"...\" in the sandbox block")
	}
	st, err := settingsOf(spec)
	if err != nil {
		return nil, err
	}
	root, err := workspaceRoot(spec)
	if err != nil {
		return nil, err
	}
	if err := p.removeLeftovers(ctx, spec); err != nil {
		return nil, err
	}
	s := &Sandbox{p: p, spec: spec, st: st, d: sessionData{
		Namespace: p.ns, Image: spec.Image, Root: root, Ports: spec.Ports,
	}}
	fail := func(err error) (sandbox.Sandbox, error) {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		if derr := s.Delete(cctx); derr != nil {
			return nil, fmt.Errorf("%w (removing what was created failed too: %v; remove objects labelled %s with kubectl delete pod,pvc,svc -n %s -l %s)", err, derr, sandbox.LabelManaged, p.ns, selector(spec.Lineage, spec.Address))
		}
		return nil, err
	}
	if st.Volume != nil {
		s.d.Claim = resourceName(spec.Address)
		if err := p.createClaim(ctx, spec, s.d.Claim, st.Volume); err != nil {
			return fail(err)
		}
	}
	if err := s.startPod(ctx); err != nil {
		return fail(err)
	}
	if st.Service && len(spec.Ports) > 0 {
		s.d.Service = resourceName(spec.Address)
		if err := p.createService(ctx, spec, s.d.Service); err != nil {
			return fail(err)
		}
	}
	if err := s.createAccounts(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

func (p *Provider) meta(ns string, spec sandbox.Spec, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: ns, Labels: labels(spec),
		Annotations: map[string]string{AnnotationAddress: spec.Address},
	}
}

func (p *Provider) createClaim(ctx context.Context, spec sandbox.Spec, name string, v *Volume) error {
	q, err := resource.ParseQuantity(v.Size)
	if err != nil {
		return fmt.Errorf("volume size %q: %w", v.Size, err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: p.meta(p.ns, spec, name),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
		},
	}
	if v.StorageClass != "" {
		pvc.Spec.StorageClassName = &v.StorageClass
	}
	if err := p.core.create(ctx, p.ns, resClaims, pvc, &corev1.PersistentVolumeClaim{}); err != nil {
		return p.apiError("creating the workspace's PersistentVolumeClaim "+name, "persistentvolumeclaims", err)
	}
	return nil
}

func (p *Provider) createService(ctx context.Context, spec sandbox.Spec, name string) error {
	svc := &corev1.Service{
		ObjectMeta: p.meta(p.ns, spec, name),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: labels(spec),
		},
	}
	for _, port := range spec.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: "p" + strconv.Itoa(port), Port: int32(port), TargetPort: intstr.FromInt32(int32(port)), Protocol: corev1.ProtocolTCP,
		})
	}
	if err := p.core.create(ctx, p.ns, resServices, svc, &corev1.Service{}); err != nil {
		return p.apiError("creating Service "+name, "services", err)
	}
	return nil
}

// apiError says what failed, and for a refusal which permission is
// missing (docs/kubernetes-provider.md, "RBAC").
func (p *Provider) apiError(what, resource string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s in namespace %s: %w; the provider's Role needs %s (docs/kubernetes-provider.md, \"RBAC\")", what, p.ns, err, resource)
	case apierrors.IsNotFound(err) && strings.Contains(err.Error(), "namespaces"):
		return fmt.Errorf("%s: namespace %s does not exist in %s: %w; create it (kubectl create namespace %s) or set the provider's namespace", what, p.ns, p.where, err, p.ns)
	}
	return fmt.Errorf("%s in namespace %s: %w", what, p.ns, err)
}

// podSpec is the Pod for s.
func (s *Sandbox) podSpec(name string) (*corev1.Pod, error) {
	spec, st := s.spec, s.st
	res := corev1.ResourceRequirements{}
	if spec.Resources.CPUs > 0 || spec.Resources.MemoryMB > 0 {
		res.Limits, res.Requests = corev1.ResourceList{}, corev1.ResourceList{}
	}
	if spec.Resources.CPUs > 0 {
		q := *resource.NewMilliQuantity(int64(spec.Resources.CPUs*1000+0.5), resource.DecimalSI)
		res.Limits[corev1.ResourceCPU], res.Requests[corev1.ResourceCPU] = q, q
	}
	if spec.Resources.MemoryMB > 0 {
		q := *resource.NewQuantity(spec.Resources.MemoryMB<<20, resource.BinarySI)
		res.Limits[corev1.ResourceMemory], res.Requests[corev1.ResourceMemory] = q, q
	}
	if spec.Resources.DiskGB > 0 || spec.Resources.PIDs > 0 || spec.Resources.GPUs > 0 {
		return nil, errors.New("resources disk, pids and gpus are not supported by the kubernetes provider; remove them")
	}
	no := false
	grace := int64(2)
	vol := corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	if s.d.Claim != "" {
		vol.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.d.Claim}}
	}
	c := corev1.Container{
		Name:       containerName,
		Image:      spec.Image,
		Command:    []string{"/bin/sh", "-c", idleScript},
		WorkingDir: s.d.Root,
		Resources:  res,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: slices.Clone(DefaultCapabilities)},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: s.d.Root}},
	}
	for _, port := range spec.Ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: int32(port), Protocol: corev1.ProtocolTCP})
	}
	pod := &corev1.Pod{
		ObjectMeta: s.p.meta(s.d.Namespace, spec, name),
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  st.NodeSelector,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{c},
			Volumes:    []corev1.Volume{vol},
		},
	}
	if st.RuntimeClass != "" {
		rc := st.RuntimeClass
		pod.Spec.RuntimeClassName = &rc
	}
	for _, t := range st.Tolerations {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.Seconds,
		})
	}
	return pod, nil
}

// Open reconnects to the sandbox of st without starting it. It fails
// with sandbox.ErrNotFound when neither its Pod nor its claim exists.
func (p *Provider) Open(ctx context.Context, spec sandbox.Spec, st sandbox.SessionState) (sandbox.Sandbox, error) {
	if st.Provider != "" && st.Provider != Kind {
		return nil, fmt.Errorf("session state belongs to provider %q", st.Provider)
	}
	var d sessionData
	if len(st.Data) > 0 {
		if err := json.Unmarshal(st.Data, &d); err != nil {
			return nil, fmt.Errorf("session data: %w", err)
		}
	}
	if d.Pod == "" || d.Namespace == "" {
		return nil, fmt.Errorf("session state names no Pod: %w", sandbox.ErrNotFound)
	}
	settings, err := settingsOf(spec)
	if err != nil {
		return nil, err
	}
	if spec.Image == "" {
		spec.Image = d.Image
	}
	if len(spec.Ports) == 0 {
		spec.Ports = d.Ports
	}
	s := &Sandbox{p: p, spec: spec, st: settings, d: d}
	pod, err := s.getPod(ctx)
	if err != nil {
		return nil, err
	}
	if pod == nil {
		// The claim or the Service may outlive the Pod (on_exit =
		// "stop"): the sandbox still exists for Refresh to report and for
		// Delete to remove.
		if ok, err := s.claimExists(ctx); err != nil || ok {
			return s, err
		}
		if ok, err := s.serviceExists(ctx); err != nil || ok {
			return s, err
		}
		return nil, fmt.Errorf("Pod %s/%s: %w", d.Namespace, d.Pod, sandbox.ErrNotFound)
	}
	if pod.Labels[sandbox.LabelManaged] != "true" {
		return nil, fmt.Errorf("Pod %s/%s is not managed by agentctl (no %s label); refusing to use it", d.Namespace, d.Pod, sandbox.LabelManaged)
	}
	return s, nil
}

// managed is one object labelled as agentctl's.
type managed struct {
	kind, name       string
	lineage, address string
}

// listManaged lists the Pods, claims and Services of a lineage and
// address (selector).
func (p *Provider) listManaged(ctx context.Context, ns, sel string) ([]managed, error) {
	opts := metav1.ListOptions{LabelSelector: sel}
	var out []managed
	add := func(kind string, m metav1.ObjectMeta) {
		out = append(out, managed{kind: kind, name: m.Name, lineage: m.Labels[sandbox.LabelLineage], address: m.Annotations[AnnotationAddress]})
	}
	var pods corev1.PodList
	if err := p.core.list(ctx, ns, resPods, opts, &pods); err != nil {
		return nil, p.apiError("listing agentctl's Pods", "pods (list)", err)
	}
	for _, o := range pods.Items {
		add("pod", o.ObjectMeta)
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := p.core.list(ctx, ns, resClaims, opts, &pvcs); err != nil {
		return nil, p.apiError("listing agentctl's PersistentVolumeClaims", "persistentvolumeclaims (list)", err)
	}
	for _, o := range pvcs.Items {
		add("pvc", o.ObjectMeta)
	}
	var svcs corev1.ServiceList
	if err := p.core.list(ctx, ns, resServices, opts, &svcs); err != nil {
		return nil, p.apiError("listing agentctl's Services", "services (list)", err)
	}
	for _, o := range svcs.Items {
		add("service", o.ObjectMeta)
	}
	return out, nil
}

// object is one object of a sandbox: its kind ("pod", "pvc", "service")
// and name.
type object struct{ kind, name string }

// resourceOf is the API resource of an object kind ("pod", "pvc",
// "service").
func resourceOf(kind string) string {
	switch kind {
	case "pod":
		return resPods
	case "pvc":
		return resClaims
	}
	return resServices
}

// deleteObject deletes an object of kind in namespace ns (a Pod at once,
// without a grace period); one already gone is not an error.
func (p *Provider) deleteObject(ctx context.Context, ns, kind, name string) error {
	var opts metav1.DeleteOptions
	if kind == "pod" {
		grace := int64(0)
		opts.GracePeriodSeconds = &grace
	}
	res := resourceOf(kind)
	if err := p.core.delete(ctx, ns, res, name, opts); err != nil && !apierrors.IsNotFound(err) {
		return p.apiError("deleting "+kind+" "+name, res+" (delete)", err)
	}
	return nil
}

// gone reports whether the object of kind and name in namespace ns no
// longer exists.
func (p *Provider) gone(ctx context.Context, ns, kind, name string) (bool, error) {
	res := resourceOf(kind)
	err := p.core.rc.Get().Namespace(ns).Resource(res).Name(name).Do(ctx).Error()
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, p.apiError("checking "+kind+" "+name+" is deleted", res+" (get)", err)
	}
	return false, nil
}

// waitGone waits until every object of objs in namespace ns is gone, for
// at most a minute.
func (p *Provider) waitGone(ctx context.Context, ns string, objs []object) error {
	deadline := time.Now().Add(time.Minute)
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		var left []string
		for _, o := range objs {
			gone, err := p.gone(ctx, ns, o.kind, o.name)
			if err != nil {
				return err
			}
			if !gone {
				left = append(left, o.kind+"/"+o.name)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still being deleted a minute later in namespace %s; see why with kubectl describe -n %s %s", strings.Join(left, ", "), ns, ns, strings.Join(left, " "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to be deleted: %w", strings.Join(left, ", "), ctx.Err())
		case <-time.After(delay):
		}
	}
}

// removeLeftovers removes the Pods, claims and Services labelled with
// spec's lineage and address: ones an interrupted create made but the
// state never recorded (sandbox.RemoveLeftovers).
func (p *Provider) removeLeftovers(ctx context.Context, spec sandbox.Spec) error {
	list := func(ctx context.Context) ([]managed, error) {
		return p.listManaged(ctx, p.ns, selector(spec.Lineage, spec.Address))
	}
	owner := func(m managed) (string, string) { return m.lineage, m.address }
	remove := func(ctx context.Context, m managed) error {
		if err := p.deleteObject(ctx, p.ns, m.kind, m.name); err != nil {
			return fmt.Errorf("removing leftover %s %s of an interrupted create: %w", m.kind, m.name, err)
		}
		return nil
	}
	return sandbox.RemoveLeftovers(ctx, spec, list, owner, remove)
}

// RemoveAll deletes every Pod, claim and Service of lineage (all of
// agentctl's when lineage is ""), and returns how many it deleted.
func (p *Provider) RemoveAll(ctx context.Context, lineage string) (int, error) {
	found, err := p.listManaged(ctx, p.ns, selector(lineage, ""))
	if err != nil {
		return 0, err
	}
	for _, m := range found {
		if err := p.deleteObject(ctx, p.ns, m.kind, m.name); err != nil {
			return 0, err
		}
	}
	return len(found), nil
}
