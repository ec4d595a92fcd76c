package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/sandbox"
)

// clientset is a full client of the test cluster, for what the tests
// check behind the provider's back (tests only: the provider itself uses
// core/v1 alone).
func clientset(t testing.TB, kubeconfig string) *k8s.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// testNamespace creates a namespace of its own for the test, deleted
// (with everything in it) when the test ends.
func testNamespace(t testing.TB, cs *k8s.Clientset) string {
	t.Helper()
	ns := "agentctl-test-" + randHex(4)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating test namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if err := cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting test namespace %s: %v", ns, err)
		}
	})
	return ns
}

// cluster is a test's view of the cluster: a provider in a namespace of
// its own and a full client.
type cluster struct {
	kubeconfig string
	ns         string
	cs         *k8s.Clientset
	p          *Provider
}

func testCluster(t testing.TB) *cluster {
	t.Helper()
	kc := k8stest.Kubeconfig(t)
	cs := clientset(t, kc)
	ns := testNamespace(t, cs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := New(ctx, Options{ConfigPath: kc, Namespace: ns, CreateTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{kubeconfig: kc, ns: ns, cs: cs, p: p}
}

func testSpec(t testing.TB) sandbox.Spec {
	return sandbox.Spec{
		Address: `sandbox.test["` + t.Name() + `"]`,
		Lineage: "test-lineage-" + randHex(4),
		Root:    "/workspace",
		Image:   k8stest.Image,
	}
}

// newSandbox creates a sandbox deleted at the end of the test.
func (c *cluster) newSandbox(t testing.TB, spec sandbox.Spec) *Sandbox {
	t.Helper()
	sb, err := c.p.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.Background()) })
	return sb.(*Sandbox)
}

// labelled lists the Pods, claims and Services in the test's namespace
// carrying agentctl's label for lineage.
func (c *cluster) labelled(t testing.TB, lineage string) []string {
	t.Helper()
	out, err := c.leftovers(context.Background(), lineage)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// leftovers is labelled with the error returned.
func (c *cluster) leftovers(ctx context.Context, lineage string) ([]string, error) {
	opts := metav1.ListOptions{LabelSelector: sandbox.LabelLineage + "=" + lineage}
	var out []string
	pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range pods.Items {
		out = append(out, "pod/"+o.Name)
	}
	pvcs, err := c.cs.CoreV1().PersistentVolumeClaims(c.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range pvcs.Items {
		out = append(out, "pvc/"+o.Name)
	}
	svcs, err := c.cs.CoreV1().Services(c.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range svcs.Items {
		out = append(out, "service/"+o.Name)
	}
	return out, nil
}

func execOK(t testing.TB, sb sandbox.Sandbox, shell string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: shell})
	if err != nil {
		t.Fatalf("exec %q: %v", shell, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, stdout %q, stderr %q", shell, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

func mustContain(t testing.TB, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("%s: missing %q in:\n%s", what, w, out)
		}
	}
}
