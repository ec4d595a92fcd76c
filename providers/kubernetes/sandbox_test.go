package kubernetes

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/sandbox"
)

func TestCreateLabelsAndHardening(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	sb := c.newSandbox(t, spec)
	ctx := context.Background()
	pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, sb.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[sandbox.LabelManaged] != "true" || pod.Labels[sandbox.LabelLineage] != spec.Lineage ||
		pod.Annotations[AnnotationAddress] != spec.Address || pod.Labels[sandbox.LabelAddress] != labelValue(spec.Address) {
		t.Errorf("labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if *pod.Spec.AutomountServiceAccountToken || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod spec %+v", pod.Spec)
	}
	// What a command in the Pod sees: no service account token, no
	// service links, only the default capabilities, no privilege gain.
	out := execOK(t, sb, `test -e /var/run/secrets/kubernetes.io/serviceaccount/token && echo TOKEN
env | grep -c _SERVICE_HOST || true
grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' '
pwd`)
	want := "1\nCapEff: 00000000000004fb\nNoNewPrivs: 1\nSeccomp: 2\n/workspace\n"
	if out != want {
		// KUBERNETES_SERVICE_HOST is always set: one match.
		t.Errorf("in the Pod:\n%s\nwant\n%s", out, want)
	}
	st := sb.Session()
	if st.Provider != Kind || !strings.Contains(string(st.Data), `"pod":"`+sb.Pod()+`"`) || strings.Contains(string(st.Data), "token") {
		t.Errorf("session %s %s", st.ID, st.Data)
	}
}

// Output is streamed, not held: 64 MiB of it keeps the head and tail
// (sandboxtest checks the limit's behaviour).
func TestExecOutputStreamed(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	sb := c.newSandbox(t, testSpec(t))
	// The container runtime here (containerd's CRI exec) can close a
	// stream early under load; when it does, the loss must be reported,
	// never passed off as the output.
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: "head -c 67108864 /dev/zero"})
	if errors.Is(err, sandbox.ErrOutputLost) && res.OriginalStdout < 64<<20 && res.ExitCode == 0 {
		t.Logf("64 MiB: the runtime cut the stream, reported: %v", err)
	} else if err != nil || res.OriginalStdout != 64<<20 || len(res.Stdout) > sandbox.DefaultOutputLimit+200 {
		t.Fatalf("64 MiB: %d bytes kept of %d, %v", len(res.Stdout), res.OriginalStdout, err)
	}
}

// A Pod whose container ended is missing (sandboxtest checks Stop, which
// deletes the Pod, and Delete); a stopped sandbox with a Service is
// missing too, yet Open finds it so that destroy removes the Service.
func TestEndedPodAndService(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	ctx := context.Background()
	spec := testSpec(t)
	sb := c.newSandbox(t, spec)
	// The container's command ends (the exec ends with it).
	_, _ = sb.Exec(ctx, sandbox.ExecRequest{Shell: "kill -TERM 1"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := sb.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st == sandbox.StatusMissing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a Pod whose container ended is %s", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left after Delete: %v", left)
	}
	svcSpec := testSpec(t)
	svcSpec.Ports = []int{8080}
	svcSpec.Settings = &SandboxSettings{Service: true}
	sb2 := c.newSandbox(t, svcSpec)
	if err := sb2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sb3, err := c.p.Open(ctx, svcSpec, sb2.Session())
	if err != nil {
		t.Fatalf("Open of a stopped sandbox with a Service: %v", err)
	}
	if st, err := sb3.Refresh(ctx); err != nil || st != sandbox.StatusMissing {
		t.Fatalf("Refresh of a stopped sandbox with a Service = %v, %v", st, err)
	}
	if err := sb3.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, svcSpec.Lineage); len(left) != 0 {
		t.Fatalf("left after Delete: %v", left)
	}
}

// With a volume block, Stop deletes only the Pod: Start mounts the claim
// in a new Pod, the workspace intact; Delete removes the claim too.
func TestVolumeStopStart(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Settings = &SandboxSettings{Volume: &Volume{StorageClass: k8stest.StorageClass, Size: "100Mi"}}
	spec.Accounts = sandbox.Accounts{Users: []sandbox.User{{Name: "alice", UID: 2001}}}
	spec.Image = k8stest.UsersImage
	sb := c.newSandbox(t, spec)
	ctx := context.Background()
	execOK(t, sb, "echo kept > keep.txt")
	pvc, err := c.cs.CoreV1().PersistentVolumeClaims(c.ns).Get(ctx, sb.Claim(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := pvc.Spec.Resources.Requests.Storage(); q.String() != "100Mi" || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != k8stest.StorageClass || pvc.Labels[sandbox.LabelLineage] != spec.Lineage {
		t.Errorf("claim: %v %v %v", q, pvc.Spec.StorageClassName, pvc.Labels)
	}
	pod1 := sb.Pod()
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, pod1, metav1.GetOptions{}); err == nil {
		t.Fatal("Stop left the Pod")
	}
	sb2, err := c.p.Open(ctx, spec, sb.Session())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := sb2.Refresh(ctx); err != nil || st != sandbox.StatusStopped {
		t.Fatalf("Refresh after Stop = %v, %v", st, err)
	}
	if err := sb2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if sb2.(*Sandbox).Pod() == pod1 {
		t.Fatal("Start reused the deleted Pod's name")
	}
	if out := execOK(t, sb2, "cat keep.txt"); out != "kept\n" {
		t.Fatalf("after Start: %q", out)
	}
	// The accounts live in the container: the new Pod has them again.
	if res := sandboxExecAs(t, sb2, "alice", "id -u"); strings.TrimSpace(string(res.Stdout)) != "2001" {
		t.Fatalf("alice after Start: %+v", res)
	}
	// Deleted behind agentctl's back: Start makes a new Pod on the claim.
	if err := c.cs.CoreV1().Pods(c.ns).Delete(ctx, sb2.(*Sandbox).Pod(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sb2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, sb2, "cat keep.txt"); out != "kept\n" {
		t.Fatalf("after a deletion behind agentctl's back: %q", out)
	}
	if err := sb2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left after Delete: %v", left)
	}
}

func sandboxExecAs(t *testing.T, sb sandbox.Sandbox, user, script string) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: script, User: user})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A Pod that cannot be scheduled, or whose image is missing, fails the
// create at once with its events, and leaves nothing behind.
func TestCreateFailsFastWithEvents(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	ctx := context.Background()
	spec := testSpec(t)
	spec.Settings = &SandboxSettings{NodeSelector: map[string]string{"agentctl.test/no-such-node": "x"}}
	start := time.Now()
	_, err := c.p.Create(ctx, spec)
	if err == nil {
		t.Fatal("a Pod that no node can take was created")
	}
	mustContain(t, "unschedulable", err.Error(), "cannot be scheduled", "didn't match Pod's node affinity/selector", "events:", "FailedScheduling")
	if time.Since(start) > 30*time.Second {
		t.Errorf("an unschedulable Pod took %v to be reported", time.Since(start))
	}
	spec = testSpec(t)
	spec.Image = "agentctl.test/no-such-image:1"
	_, err = c.p.Create(ctx, spec)
	if err == nil {
		t.Fatal("a Pod with a missing image was created")
	}
	mustContain(t, "missing image", err.Error(), "agentctl.test/no-such-image:1", "ErrImagePull", "events:")
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left after failed creates: %v", left)
	}
	pods, _ := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Fatalf("Pods left: %d", len(pods.Items))
	}
	t.Logf("missing image: %v", err)
}

// What an interrupted create left (a Pod with the same lineage and
// address the state never recorded) is removed by the next create.
func TestCreateRemovesLeftovers(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Ports = []int{8080}
	spec.Settings = &SandboxSettings{Service: true}
	ctx := context.Background()
	first, err := c.p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	other := testSpec(t)
	other.Lineage = spec.Lineage
	other.Address = "sandbox.other"
	keep := c.newSandbox(t, other)
	sb := c.newSandbox(t, spec)
	if _, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, first.(*Sandbox).Pod(), metav1.GetOptions{}); err == nil {
		t.Fatal("the leftover Pod is still there")
	}
	if _, err := c.cs.CoreV1().Services(c.ns).Get(ctx, first.(*Sandbox).Service(), metav1.GetOptions{}); err == nil {
		t.Fatal("the leftover Service is still there")
	}
	execOK(t, keep, "true")
	execOK(t, sb, "true")
}

func TestPortsAndService(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Ports = []int{8080}
	sb := c.newSandbox(t, spec)
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "www/index.html", []byte("hello from the pod"), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := sb.PortURL(ctx, 8080)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listens in the Pod yet: the connection fails, the forward
	// (and the URL recorded in the state) stays.
	for range 5 {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			t.Fatal("GET before the server started succeeded")
		}
	}
	execOK(t, sb, "httpd -p 8080 -h /workspace/www")
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("URL %q not on 127.0.0.1", u)
	}
	if body := httpGet(t, u+"/index.html"); body != "hello from the pod" {
		t.Fatalf("GET %s = %q", u, body)
	}
	if u2, err := sb.PortURL(ctx, 8080); err != nil || u2 != u {
		t.Fatalf("second PortURL = %q, %v; want the same forward %q", u2, err, u)
	}
	if _, err := sb.PortURL(ctx, 9999); err == nil {
		t.Fatal("PortURL of an unexposed port succeeded")
	}
	// The forward ends with the sandbox.
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(u); err == nil {
		t.Fatal("the port-forward outlived Delete")
	}

	spec = testSpec(t)
	spec.Ports = []int{8080}
	spec.Settings = &SandboxSettings{Service: true}
	sb = c.newSandbox(t, spec)
	svc, err := c.cs.CoreV1().Services(c.ns).Get(ctx, sb.Service(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, err = sb.PortURL(ctx, 8080)
	if err != nil || u != "http://"+svc.Spec.ClusterIP+":8080" {
		t.Fatalf("Service URL %q, %v (cluster IP %s)", u, err, svc.Spec.ClusterIP)
	}
	// The Service selects the sandbox's Pod: a Pod in the cluster
	// reaches it at the cluster IP.
	execOK(t, sb, "mkdir -p www && echo via-service > www/index.html && httpd -p 8080 -h /workspace/www")
	client := c.newSandbox(t, testSpec(t))
	var out string
	for i := 0; i < 30 && !strings.HasSuffix(out, "\r\n\r\nvia-service\n"); i++ {
		// BusyBox's wget, statically linked with glibc, crashes in a
		// scratch image: a plain request through nc.
		res, err := client.Exec(ctx, sandbox.ExecRequest{Shell: "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc -w 2 " + svc.Spec.ClusterIP + " 8080"})
		if err != nil {
			t.Fatal(err)
		}
		out = string(res.Stdout)
	}
	if !strings.HasSuffix(out, "\r\n\r\nvia-service\n") {
		t.Fatalf("GET %s from another Pod = %q", u, out)
	}
	// Cluster IPs route from this machine too (kube-proxy runs here).
	if body := httpGet(t, u+"/index.html"); body != "via-service\n" {
		t.Fatalf("GET %s from the host = %q", u, body)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left after Delete: %v", left)
	}
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	var last error
	for i := 0; i < 50; i++ {
		resp, err := http.Get(u)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(b)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", u, last)
	return ""
}

// Drift: a Pod whose image was changed behind agentctl's back plans a
// replace.
func TestDriftImageChanged(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	sb := c.newSandbox(t, spec)
	ctx := context.Background()
	if why, err := sb.Drift(ctx, spec); err != nil || why != "" {
		t.Fatalf("fresh sandbox drifts: %q %v", why, err)
	}
	pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, sb.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.Containers[0].Image = k8stest.UsersImage
	if _, err := c.cs.CoreV1().Pods(c.ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	why, err := sb.Drift(ctx, spec)
	if err != nil || !strings.Contains(why, "changed to \""+k8stest.UsersImage+"\" outside agentctl") {
		t.Fatalf("Drift = %q, %v", why, err)
	}
}

// TestDeleteWhereItWasMade: a sandbox is deleted in the namespace it was
// made in, also by a provider now set to another namespace (changing the
// namespace replaces the sandbox: the old one must not be left behind).
func TestDeleteWhereItWasMade(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	ctx := context.Background()
	spec := testSpec(t)
	spec.Ports = []int{8080}
	spec.Settings = &SandboxSettings{Service: true}
	sb, err := c.p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.Background()) })
	other, err := New(ctx, Options{ConfigPath: c.kubeconfig, Namespace: testNamespace(t, c.cs)})
	if err != nil {
		t.Fatal(err)
	}
	old, err := other.Open(ctx, spec, sb.Session())
	if err != nil {
		t.Fatalf("Open through a provider of another namespace: %v", err)
	}
	if err := old.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left in %s: %v", c.ns, left)
	}
}
