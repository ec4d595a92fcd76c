package kubernetes

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/sandbox"
)

// documentedRole is the Role of docs/kubernetes-provider.md, "RBAC".
func documentedRole(t testing.TB) *rbacv1.Role {
	t.Helper()
	doc, err := os.ReadFile("../../docs/kubernetes-provider.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- role:begin -->\n```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```\n<!-- role:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/kubernetes-provider.md has no role block between <!-- role:begin --> and <!-- role:end -->")
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(block), &role); err != nil {
		t.Fatalf("the documented Role: %v", err)
	}
	return &role
}

// The Role the documentation gives is all the provider needs: a user
// with no other permission, bound to it, runs a sandbox's whole life
// (create with a claim, a Service and accounts, exec, files, ports,
// stop, start, events of a failing create, leftovers, delete). Without
// the binding, the error says what is missing.
func TestDocumentedRoleSuffices(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	limited := k8stest.LimitedKubeconfig(t)
	ctx := context.Background()

	lp, err := New(ctx, Options{ConfigPath: limited, Namespace: c.ns, CreateTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t)
	if _, err := lp.Create(ctx, spec); err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "the provider's Role needs") {
		t.Fatalf("Create without the Role: %v", err)
	}

	role := documentedRole(t)
	role.Namespace = c.ns
	if _, err := c.cs.RbacV1().Roles(c.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "agentctl-sandboxes", Namespace: c.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: k8stest.LimitedUser}},
	}
	if _, err := c.cs.RbacV1().RoleBindings(c.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	spec.Image = k8stest.UsersImage
	spec.Ports = []int{8080}
	spec.Accounts = sandbox.Accounts{Users: []sandbox.User{{Name: "alice", UID: 2001}}}
	spec.Settings = &SandboxSettings{Service: true, Volume: &Volume{StorageClass: k8stest.StorageClass, Size: "100Mi"}}
	// A leftover of an interrupted create, removed by the next one.
	var sb sandbox.Sandbox
	for i := 0; i < 2; i++ {
		// RBAC bindings take a moment to reach the authorizer.
		deadline := time.Now().Add(20 * time.Second)
		for {
			sb, err = lp.Create(ctx, spec)
			if err == nil || !strings.Contains(err.Error(), "forbidden") || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("Create with the documented Role: %v", err)
		}
	}
	defer sb.Delete(ctx)
	if err := sb.WriteFile(ctx, "www/index.html", []byte("limited"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "cat www/index.html; id -un", User: "alice"})
	if err != nil || string(res.Stdout) != "limitedalice\n" {
		t.Fatalf("exec as alice: %+v %v", res, err)
	}
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Shell: "sleep 1009", Timeout: time.Second})
	if err != nil || !res.TimedOut {
		t.Fatalf("timeout: %+v %v", res, err)
	}
	if _, err := sb.PortURL(ctx, 8080); err != nil {
		t.Fatalf("Service URL: %v", err)
	}
	rc, err := sb.CopyOut(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, rc); err != nil || n == 0 {
		t.Fatalf("CopyOut: %d bytes, %v", n, err)
	}
	rc.Close()
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sb2, err := lp.Open(ctx, spec, sb.Session())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := sb2.Refresh(ctx); err != nil || st != sandbox.StatusStopped {
		t.Fatalf("Refresh: %v %v", st, err)
	}
	if err := sb2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := sb2.ReadFile(ctx, "www/index.html", 0); err != nil || string(got) != "limited" {
		t.Fatalf("after Start: %q %v", got, err)
	}
	// A Pod without a port-forwarding Service: the forward works too.
	fwd := testSpec(t)
	fwd.Ports = []int{8080}
	fsb, err := lp.Create(ctx, fwd)
	if err != nil {
		t.Fatal(err)
	}
	defer fsb.Delete(ctx)
	execOK(t, fsb, "mkdir -p www && echo fwd > www/index.html && httpd -p 8080 -h /workspace/www")
	u, err := fsb.PortURL(ctx, 8080)
	if err != nil {
		t.Fatal(err)
	}
	if body := httpGet(t, u+"/index.html"); body != "fwd\n" {
		t.Fatalf("GET through the forward: %q", body)
	}
	// A failing create shows its events and the log of its container.
	bad := testSpec(t)
	bad.Settings = &SandboxSettings{NodeSelector: map[string]string{"agentctl.test/none": "x"}}
	if _, err := lp.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "FailedScheduling") {
		t.Fatalf("failing create: %v", err)
	}
	if err := sb2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fsb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
	if left := c.labelled(t, fwd.Lineage); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}

// The documented Role parses and grants what the provider calls.
func TestDocumentedRoleParses(t *testing.T) {
	role := documentedRole(t)
	granted := map[string]bool{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				granted[res+" "+v] = true
			}
		}
	}
	for _, need := range []string{"pods create", "pods get", "pods list", "pods delete", "pods/exec create", "pods/exec get",
		"pods/portforward create", "pods/log get", "persistentvolumeclaims create", "persistentvolumeclaims delete",
		"services create", "services get", "events list"} {
		if !granted[need] {
			t.Errorf("the documented Role does not grant %s", need)
		}
	}
}
