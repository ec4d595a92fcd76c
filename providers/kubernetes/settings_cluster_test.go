package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentctl/agentctl/sandbox"
)

// Each scheduling and resource setting reaches the Pod and is in effect
// in it: a RuntimeClass (one made here for the node's runc handler),
// the node selector, a toleration, cpu and memory limits (the
// container's cgroup).
func TestSettingsInEffect(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	ctx := context.Background()
	nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	host := nodes.Items[0].Labels["kubernetes.io/hostname"]
	rc := "agentctl-test-runc-" + randHex(3)
	if _, err := c.cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: rc}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cs.NodeV1().RuntimeClasses().Delete(context.Background(), rc, metav1.DeleteOptions{}) })
	secs := int64(60)
	spec := testSpec(t)
	spec.Resources = sandbox.Resources{CPUs: 0.5, MemoryMB: 256}
	spec.Settings = &SandboxSettings{
		RuntimeClass: rc,
		NodeSelector: map[string]string{"kubernetes.io/hostname": host},
		Tolerations:  []Toleration{{Key: "agentctl.test/maintenance", Operator: "Exists", Effect: "NoExecute", Seconds: &secs}},
	}
	sb := c.newSandbox(t, spec)
	pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, sb.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != rc || pod.Spec.NodeSelector["kubernetes.io/hostname"] != host || pod.Spec.NodeName != nodes.Items[0].Name {
		t.Errorf("Pod spec: runtime class %v, node selector %v, node %s", pod.Spec.RuntimeClassName, pod.Spec.NodeSelector, pod.Spec.NodeName)
	}
	found := false
	for _, tol := range pod.Spec.Tolerations {
		if tol.Key == "agentctl.test/maintenance" && tol.TolerationSeconds != nil && *tol.TolerationSeconds == 60 {
			found = true
		}
	}
	if !found {
		t.Errorf("tolerations %+v", pod.Spec.Tolerations)
	}
	if pod.Status.QOSClass != "Guaranteed" {
		t.Errorf("QoS class %s", pod.Status.QOSClass)
	}
	limits := `cd /sys/fs/cgroup
if [ -f memory.max ]; then cat memory.max; cut -d' ' -f1 cpu.max
else cat memory/memory.limit_in_bytes cpu/cpu.cfs_quota_us; fi`
	if got := execOK(t, sb, limits); got != "268435456\n50000\n" {
		t.Errorf("the container's cgroup limits: %q", got)
	}

	// A RuntimeClass the cluster does not have is refused by the API
	// server, with its name.
	bad := testSpec(t)
	bad.Settings = &SandboxSettings{RuntimeClass: "agentctl-no-such-class"}
	if _, err := c.p.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "agentctl-no-such-class") {
		t.Fatalf("missing RuntimeClass: %v", err)
	}
	if left := c.labelled(t, bad.Lineage); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}

// A Pod that stays pending for a reason that may pass (its claim cannot
// be bound yet) is waited for only as long as the create timeout, then
// reported with the claim's events and removed.
func TestCreateTimeout(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	ctx := context.Background()
	p, err := New(ctx, Options{ConfigPath: c.kubeconfig, Namespace: c.ns, CreateTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t)
	spec.Settings = &SandboxSettings{Volume: &Volume{StorageClass: "agentctl-no-such-class", Size: "10Mi"}}
	start := time.Now()
	_, err = p.Create(ctx, spec)
	if err == nil {
		t.Fatal("a Pod whose claim cannot be bound was created")
	}
	mustContain(t, "create timeout", err.Error(), "did not run within the create timeout of 3s", "raise the provider's create_timeout", "events:", "PersistentVolumeClaim")
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the create took %v", d)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
	t.Logf("%v", err)
}

// The context setting picks a context of the kubeconfig; the namespace
// is the provider's.
func TestContextSetting(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	raw, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := New(ctx, Options{ConfigPath: c.kubeconfig, Context: raw.CurrentContext, Namespace: c.ns})
	if err != nil {
		t.Fatal(err)
	}
	if p.Namespace() != c.ns {
		t.Errorf("namespace %q", p.Namespace())
	}
	sb, err := p.Create(ctx, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Delete(ctx)
	if !strings.HasPrefix(sb.ID(), c.ns+"/") {
		t.Errorf("sandbox %s is not in namespace %s", sb.ID(), c.ns)
	}
	if _, err := New(ctx, Options{ConfigPath: c.kubeconfig, Context: "agentctl-no-such-context"}); err == nil || !strings.Contains(err.Error(), "agentctl-no-such-context") {
		t.Errorf("unknown context: %v", err)
	}
}
