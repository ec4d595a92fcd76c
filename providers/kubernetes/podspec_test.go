package kubernetes

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentctl/agentctl/sandbox"
)

// The Pod a sandbox runs in: hardened by default, with each setting in
// its place.
func TestPodSpec(t *testing.T) {
	secs := int64(30)
	s := &Sandbox{p: &Provider{ns: "agents"}, spec: sandbox.Spec{
		Address: "sandbox.box", Lineage: "L1", Image: "python:3.12", Ports: []int{8080},
		Resources: sandbox.Resources{CPUs: 1.5, MemoryMB: 512},
	}, st: &SandboxSettings{
		RuntimeClass: "gvisor", NodeSelector: map[string]string{"pool": "agents"},
		Tolerations: []Toleration{{Key: "dedicated", Operator: "Exists", Effect: "NoExecute", Seconds: &secs}},
	}, d: sessionData{Namespace: "agents", Root: "/workspace", Claim: "claim-1"}}
	pod, err := s.podSpec("agentctl-box-1")
	if err != nil {
		t.Fatal(err)
	}
	ps := pod.Spec
	if *ps.AutomountServiceAccountToken || *ps.EnableServiceLinks || ps.RestartPolicy != corev1.RestartPolicyNever ||
		*ps.TerminationGracePeriodSeconds > 5 || ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod defaults: %+v", ps)
	}
	c := ps.Containers[0]
	if *c.SecurityContext.AllowPrivilegeEscalation || !slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		slices.Contains(c.SecurityContext.Capabilities.Add, "NET_RAW") || c.SecurityContext.Privileged != nil {
		t.Errorf("container security: %+v", c.SecurityContext)
	}
	if c.Image != "python:3.12" || c.ImagePullPolicy != "" || c.Command[0] != "/bin/sh" || c.WorkingDir != "/workspace" {
		t.Errorf("container: %+v", c)
	}
	if got := c.Resources.Limits.Cpu().MilliValue(); got != 1500 {
		t.Errorf("cpu limit %dm", got)
	}
	if got := c.Resources.Requests.Memory().Value(); got != 512<<20 {
		t.Errorf("memory request %d", got)
	}
	if *ps.RuntimeClassName != "gvisor" || ps.NodeSelector["pool"] != "agents" || ps.Tolerations[0].Key != "dedicated" || *ps.Tolerations[0].TolerationSeconds != 30 {
		t.Errorf("scheduling: %+v", ps)
	}
	if ps.Volumes[0].PersistentVolumeClaim == nil || ps.Volumes[0].PersistentVolumeClaim.ClaimName != "claim-1" || c.VolumeMounts[0].MountPath != "/workspace" {
		t.Errorf("workspace volume: %+v %+v", ps.Volumes, c.VolumeMounts)
	}
	if pod.Labels[sandbox.LabelLineage] != "L1" || pod.Annotations[AnnotationAddress] != "sandbox.box" || pod.Namespace != "agents" {
		t.Errorf("meta: %+v", pod.ObjectMeta)
	}
	if c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports: %+v", c.Ports)
	}
	s.d.Claim = ""
	if pod, _ := s.podSpec("x"); pod.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("without a volume block the workspace is not an emptyDir: %+v", pod.Spec.Volumes)
	}
	s.spec.Resources.PIDs = 10
	if _, err := s.podSpec("x"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("pids: %v", err)
	}
}

func TestPodBlocked(t *testing.T) {
	pending := func(mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
		mod(p)
		return p
	}
	for _, c := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{pending(func(p *corev1.Pod) {}), ""},
		{pending(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}}
		}), "cannot be scheduled: 0/1 nodes"},
		{pending(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."}}
		}), ""},
		{pending(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
		}), "ErrImagePull: not found"},
		{pending(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		}), ""},
		{pending(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 127, Reason: "Error"}}}}
		}), "exited with 127"},
	} {
		if got := podBlocked(c.pod); c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("podBlocked = %q, want %q", got, c.want)
		}
	}
}
