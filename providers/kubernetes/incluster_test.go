package kubernetes

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/internal/testenv"
)

// TestInClusterConfig: with no config_path, no KUBECONFIG and no
// ~/.kube/config, agentctl uses the configuration of the Pod it runs in:
// the API server from KUBERNETES_SERVICE_HOST and _PORT, the service
// account's token, CA and namespace from
// /var/run/secrets/kubernetes.io/serviceaccount. The command runs in a
// mount namespace of its own where those files are a service account's
// (bound to the documented Role), as the kubelet mounts them in a Pod;
// the host's /run is untouched.
func TestInClusterConfig(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	if os.Geteuid() != 0 {
		testenv.Missing(t, "mounting a service account's files at /var/run/secrets needs root (in a mount namespace of the test's own)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.Missing(t, "util-linux's unshare is not installed")
	}
	ctx := context.Background()

	// A service account allowed what the documentation says, and a token
	// for it as the kubelet would project one.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agentctl", Namespace: c.ns}}
	if _, err := c.cs.CoreV1().ServiceAccounts(c.ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := documentedRole(t)
	role.Namespace = c.ns
	if _, err := c.cs.RbacV1().Roles(c.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "agentctl-sandboxes", Namespace: c.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: c.ns}},
	}
	if _, err := c.cs.RbacV1().RoleBindings(c.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exp := int64(3600)
	tok, err := c.cs.CoreV1().ServiceAccounts(c.ns).CreateToken(ctx, sa.Name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	ca := cluster.CertificateAuthorityData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(cluster.CertificateAuthority); err != nil {
			t.Fatal(err)
		}
	}
	server, err := url.Parse(cluster.Server)
	if err != nil {
		t.Fatal(err)
	}

	secrets := t.TempDir()
	for name, data := range map[string]string{"token": tok.Status.Token, "ca.crt": string(ca), "namespace": c.ns} {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir, home := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(`
provider "kubernetes" {}
sandbox "x" {
  provider = provider.kubernetes
  image    = "`+k8stest.Image+`"
  on_exit  = "keep"
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := agentctlBinary(t)
	// agentctl ARGS... in a Pod's environment: a private /run holding the
	// service account's files, no kubeconfig anywhere.
	run := func(args ...string) (string, error) {
		script := `mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount &&
cp "$SECRETS"/* /run/secrets/kubernetes.io/serviceaccount/ && exec "$@"`
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, unshare, append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh", bin, "-no-color"}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "SECRETS=" + secrets, "NO_COLOR=1",
			"KUBERNETES_SERVICE_HOST=" + server.Hostname(), "KUBERNETES_SERVICE_PORT=" + server.Port()}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("destroy", "-auto-approve"); err != nil {
			t.Errorf("destroy: %v\n%s", err, out)
		}
	})
	var out string
	// RBAC bindings take a moment to reach the authorizer.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Second) {
		out, err = run("apply", "-auto-approve")
		if err == nil || !strings.Contains(out, "forbidden") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("apply in the Pod's environment: %v\n%s", err, out)
	}
	pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "dev.agentctl.address=sandbox.x"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the sandbox's Pod in the service account's namespace %s: %d, %v\n%s", c.ns, len(pods.Items), err, out)
	}
	if out, err := run("exec", "sandbox.x", "--", "echo", "from the cluster"); err != nil || !strings.Contains(out, "from the cluster") {
		t.Fatalf("exec in the Pod's environment: %v\n%s", err, out)
	}
	// The same command outside a Pod (no service account files) says
	// where it looked and how to point it at a cluster.
	cmd := exec.CommandContext(ctx, bin, "-no-color", "plan")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "NO_COLOR=1"}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "set config_path (or KUBECONFIG) to a kubeconfig, or run agentctl in a Pod with a service account") {
		t.Fatalf("plan with no configuration: %v\n%s", err, out)
	}
}
