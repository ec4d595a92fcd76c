package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/agentctl/agentctl/sandbox"
)

// Sandbox is one Pod (and its claim and Service, when it has them).
type Sandbox struct {
	p    *Provider
	spec sandbox.Spec
	st   *SandboxSettings

	mu sync.Mutex
	d  sessionData
	// forward is the port-forward to the current Pod, started by PortURL.
	forward *forward
}

var (
	_ sandbox.Sandbox        = (*Sandbox)(nil)
	_ sandbox.Drifter        = (*Sandbox)(nil)
	_ sandbox.ProcessStarter = (*Sandbox)(nil)
)

// ID is namespace/pod.
func (s *Sandbox) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.Namespace + "/" + s.d.Pod
}

// Pod is the name of the sandbox's current Pod.
func (s *Sandbox) Pod() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.Pod
}

// Namespace is the sandbox's namespace.
func (s *Sandbox) Namespace() string { return s.d.Namespace }

// Claim is the workspace's PersistentVolumeClaim ("" without a volume block).
func (s *Sandbox) Claim() string { return s.d.Claim }

// Service is the sandbox's Service ("" without service = true).
func (s *Sandbox) Service() string { return s.d.Service }

// Root is the workspace root in the Pod.
func (s *Sandbox) Root() string { return s.d.Root }

// Session returns namespace and names of the sandbox's objects, its image
// and root: no credentials.
func (s *Sandbox) Session() sandbox.SessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, _ := json.Marshal(s.d)
	return sandbox.SessionState{Provider: Kind, ID: s.d.Namespace + "/" + s.d.Pod, Data: data}
}

func (s *Sandbox) pod() (ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.Namespace, s.d.Pod
}

// getPod returns the sandbox's Pod, nil when it no longer exists (or
// another Pod took its name).
func (s *Sandbox) getPod(ctx context.Context) (*corev1.Pod, error) {
	ns, name := s.pod()
	pod, err := s.p.core.getPod(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, s.p.apiError("reading Pod "+name, "pods (get)", err)
	}
	s.mu.Lock()
	uid := s.d.UID
	s.mu.Unlock()
	if uid != "" && string(pod.UID) != uid {
		return nil, nil
	}
	return pod, nil
}

func (s *Sandbox) serviceExists(ctx context.Context) (bool, error) {
	if s.d.Service == "" {
		return false, nil
	}
	err := s.p.core.get(ctx, s.d.Namespace, resServices, s.d.Service, &corev1.Service{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, s.p.apiError("reading Service "+s.d.Service, "services (get)", err)
	}
	return true, nil
}

func (s *Sandbox) claimExists(ctx context.Context) (bool, error) {
	if s.d.Claim == "" {
		return false, nil
	}
	err := s.p.core.get(ctx, s.d.Namespace, resClaims, s.d.Claim, &corev1.PersistentVolumeClaim{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, s.p.apiError("reading PersistentVolumeClaim "+s.d.Claim, "persistentvolumeclaims (get)", err)
	}
	return true, nil
}

// startPod creates a new Pod for the sandbox and waits until it runs.
func (s *Sandbox) startPod(ctx context.Context) error {
	name := resourceName(s.spec.Address)
	pod, err := s.podSpec(name)
	if err != nil {
		return err
	}
	created := &corev1.Pod{}
	if err := s.p.core.create(ctx, s.d.Namespace, resPods, pod, created); err != nil {
		return s.p.apiError("creating Pod "+name+" from image "+s.spec.Image, "pods (create)", err)
	}
	s.mu.Lock()
	s.d.Pod, s.d.UID, s.d.ImageID = created.Name, string(created.UID), ""
	s.mu.Unlock()
	running, err := s.waitRunning(ctx, created)
	if err != nil {
		return err
	}
	for _, cs := range running.Status.ContainerStatuses {
		if cs.Name == containerName {
			s.mu.Lock()
			s.d.ImageID = cs.ImageID
			s.mu.Unlock()
		}
	}
	return nil
}

// fatalWaiting are container waiting reasons that no wait will cure.
var fatalWaiting = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}

// waitRunning polls the Pod until its container runs, the create timeout
// passes, or it can never run (unschedulable, image missing, container
// failed): then the error holds the Pod's status and events.
func (s *Sandbox) waitRunning(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	timeout := s.p.opts.CreateTimeout
	start := time.Now()
	deadline := start.Add(timeout)
	delay := 10 * time.Millisecond
	for {
		if why := podBlocked(pod); why != "" {
			return nil, s.notRunning(ctx, pod, why)
		}
		if podRunning(pod) {
			return pod, nil
		}
		if time.Now().After(deadline) {
			return nil, s.notRunning(ctx, pod, fmt.Sprintf("the Pod did not run within the create timeout of %s (phase %s%s); raise the provider's create_timeout if the cluster is slow to pull or schedule", timeout, pod.Status.Phase, waitingReason(pod)))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for Pod %s to run: %w", pod.Name, ctx.Err())
		case <-time.After(delay):
		}
		// A Pod usually runs within seconds: poll often at first.
		if time.Since(start) < 10*time.Second {
			delay = min(delay*2, 100*time.Millisecond)
		} else {
			delay = 500 * time.Millisecond
		}
		p, err := s.p.core.getPod(ctx, pod.Namespace, pod.Name)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("Pod %s/%s was deleted while agentctl waited for it to run", pod.Namespace, pod.Name)
		}
		if err != nil {
			return nil, s.p.apiError("waiting for Pod "+pod.Name, "pods (get)", err)
		}
		pod = p
	}
}

func podRunning(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == containerName {
			return cs.State.Running != nil
		}
	}
	return false
}

// podBlocked says why the Pod can never run, or "".
func podBlocked(pod *corev1.Pod) string {
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		why := "the Pod " + strings.ToLower(string(pod.Status.Phase))
		if pod.Status.Reason != "" {
			why += " (" + pod.Status.Reason + ": " + pod.Status.Message + ")"
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				why += fmt.Sprintf("; its container exited with %d (%s) %s", t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
			}
		}
		return why
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			// A claim being bound is only a delay.
			if strings.Contains(strings.ToLower(c.Message), "persistentvolumeclaim") {
				continue
			}
			return "the Pod cannot be scheduled: " + c.Message
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && slices.Contains(fatalWaiting, w.Reason) {
			return fmt.Sprintf("its container cannot start: %s: %s", w.Reason, w.Message)
		}
	}
	return ""
}

func waitingReason(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return ", container " + w.Reason
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Status == corev1.ConditionFalse && c.Message != "" {
			return ", " + string(c.Type) + ": " + c.Message
		}
	}
	return ""
}

// notRunning is the error of a Pod that will not run: why, then its
// events (and its claim's), so the cause shows without kubectl.
func (s *Sandbox) notRunning(ctx context.Context, pod *corev1.Pod, why string) error {
	msg := fmt.Sprintf("Pod %s/%s from image %q will not run: %s", pod.Namespace, pod.Name, s.spec.Image, why)
	ev := s.events(ctx, "Pod", pod.Name)
	if s.d.Claim != "" {
		if ce := s.events(ctx, "PersistentVolumeClaim", s.d.Claim); ce != "" {
			ev += ce
		}
	}
	if ev != "" {
		msg += "\nevents:" + ev
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		msg += s.logTail(ctx, pod.Name)
	}
	return errors.New(msg)
}

// logTail is the last lines the container wrote, for a Pod that ended.
func (s *Sandbox) logTail(ctx context.Context, pod string) string {
	cctx, cancel := sandbox.CleanupContext(ctx)
	defer cancel()
	raw, err := s.p.core.rc.Get().Namespace(s.d.Namespace).Resource(resPods).Name(pod).SubResource("log").
		Param("container", containerName).Param("tailLines", "20").Param("limitBytes", "4096").Do(cctx).Raw()
	if err != nil {
		return "\n(the container's log could not be read: " + err.Error() + "; the provider's Role needs pods/log (get))"
	}
	if out := strings.TrimSpace(string(raw)); out != "" {
		return "\nlast lines of the container's log:\n  " + strings.ReplaceAll(out, "\n", "\n  ")
	}
	return ""
}

// events lists the events of one object, one per line, oldest first;
// when they cannot be listed, a line saying why.
func (s *Sandbox) events(ctx context.Context, kind, name string) string {
	cctx, cancel := sandbox.CleanupContext(ctx)
	defer cancel()
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	var list corev1.EventList
	if err := s.p.core.list(cctx, s.d.Namespace, resEvents, metav1.ListOptions{FieldSelector: sel}, &list); err != nil {
		return "\n  (the events of " + kind + " " + name + " could not be listed: " + err.Error() + "; the provider's Role needs events (list))"
	}
	items := list.Items
	slices.SortFunc(items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	var b strings.Builder
	for _, e := range items {
		fmt.Fprintf(&b, "\n  %s %s %s: %s", kind, e.Type, e.Reason, strings.TrimSpace(e.Message))
		if e.Count > 1 {
			fmt.Fprintf(&b, " (x%d)", e.Count)
		}
	}
	return b.String()
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// Refresh reports running; stopped when the Pod is gone or not running
// but the workspace's claim is kept (a stopped sandbox with a volume
// block, or one whose Pod was deleted or evicted: the next apply makes a
// new Pod on the claim); missing when the Pod is gone, evicted or failed
// and the workspace went with it (plan says restore).
func (s *Sandbox) Refresh(ctx context.Context) (sandbox.Status, error) {
	pod, err := s.getPod(ctx)
	if err != nil {
		return "", err
	}
	if pod != nil && podRunning(pod) {
		return sandbox.StatusRunning, nil
	}
	if pod != nil && pod.Status.Phase == corev1.PodPending && pod.DeletionTimestamp == nil {
		return sandbox.StatusStopped, nil
	}
	if s.d.Claim != "" {
		ok, err := s.claimExists(ctx)
		if err != nil {
			return "", err
		}
		if ok {
			return sandbox.StatusStopped, nil
		}
	}
	return sandbox.StatusMissing, nil
}

// Start makes the sandbox run: nothing when its Pod runs, a wait when
// it is pending, and with a volume block a new Pod mounting the claim
// when the Pod is gone, evicted or failed. Without a volume block such a
// sandbox is gone (sandbox.ErrNotFound): the engine restores it from its
// snapshot.
func (s *Sandbox) Start(ctx context.Context) error {
	pod, err := s.getPod(ctx)
	if err != nil {
		return err
	}
	if pod != nil && podRunning(pod) {
		return nil
	}
	if pod != nil && pod.Status.Phase == corev1.PodPending && pod.DeletionTimestamp == nil {
		_, err := s.waitRunning(ctx, pod)
		return err
	}
	if s.d.Claim == "" {
		return s.notFound("start")
	}
	if ok, err := s.claimExists(ctx); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("start: the workspace's PersistentVolumeClaim %s/%s: %w", s.d.Namespace, s.d.Claim, sandbox.ErrNotFound)
	}
	if pod != nil {
		if err := s.deletePod(ctx, true); err != nil {
			return err
		}
	}
	// A Pod another agentctl started on the claim and could not delete
	// (an exec on the stopped sandbox that was killed) would keep the
	// claim in use: only the new Pod may mount it.
	if err := s.removeOtherPods(ctx); err != nil {
		return err
	}
	s.closeForward()
	if err := s.startPod(ctx); err != nil {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		_ = s.deletePod(cctx, false)
		return err
	}
	// The accounts live in the container's /etc: a new Pod needs them again.
	return s.createAccounts(ctx)
}

// removeOtherPods deletes the Pods labelled with the sandbox's lineage
// and address other than its current one.
func (s *Sandbox) removeOtherPods(ctx context.Context) error {
	if s.spec.Lineage == "" || s.spec.Address == "" {
		return nil
	}
	_, current := s.pod()
	found, err := s.p.listManaged(ctx, s.d.Namespace, selector(s.spec.Lineage, s.spec.Address))
	if err != nil {
		return err
	}
	for _, m := range found {
		if m.kind == "pod" && m.name != current && m.address == s.spec.Address {
			if err := s.p.deleteObject(ctx, s.d.Namespace, m.kind, m.name); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Sandbox) notFound(op string) error {
	ns, name := s.pod()
	return fmt.Errorf("%s: Pod %s/%s: %w", op, ns, name, sandbox.ErrNotFound)
}

// deletePod deletes the current Pod and, with wait, waits until it is
// gone (its processes ended) for at most a minute.
func (s *Sandbox) deletePod(ctx context.Context, wait bool) error {
	ns, name := s.pod()
	if err := s.p.deleteObject(ctx, ns, "pod", name); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	return s.p.waitGone(ctx, ns, []object{{"pod", name}})
}

// Stop deletes the Pod (on_exit = "stop": the engine has snapshotted the
// workspace after the run). With a volume block the claim keeps the
// workspace and Start mounts it in a new Pod; without one the next apply
// restores the snapshot into a new Pod.
func (s *Sandbox) Stop(ctx context.Context) error {
	s.closeForward()
	return s.deletePod(ctx, true)
}

// StopDiscardsWorkspace reports whether Stop loses the workspace: it
// deletes the Pod, and without a volume claim the workspace goes with it
// (the engine snapshots it first and restores it when a run needs it).
func (s *Sandbox) StopDiscardsWorkspace() bool { return s.d.Claim == "" }

// Delete removes the Pod, the claim and the Service, and anything else
// labelled with the sandbox's lineage and address. Deleting a missing
// sandbox is not an error.
func (s *Sandbox) Delete(ctx context.Context) error {
	s.closeForward()
	var errs []error
	ns, name := s.pod()
	var objs []object
	add := func(kind, name string) {
		if o := (object{kind, name}); name != "" && !slices.Contains(objs, o) {
			objs = append(objs, o)
		}
	}
	add("pod", name)
	add("service", s.d.Service)
	add("pvc", s.d.Claim)
	if s.spec.Lineage != "" && s.spec.Address != "" {
		found, err := s.p.listManaged(ctx, s.d.Namespace, selector(s.spec.Lineage, s.spec.Address))
		if err != nil {
			errs = append(errs, err)
		}
		for _, m := range found {
			if m.address == s.spec.Address {
				add(m.kind, m.name)
			}
		}
	}
	for _, o := range objs {
		if err := s.p.deleteObject(ctx, ns, o.kind, o.name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Deletion is asynchronous (a claim stays while a Pod still uses it,
	// a Pod until its container stopped): wait until all of it is gone,
	// so that a destroy that returns has left nothing.
	return s.p.waitGone(ctx, ns, objs)
}

// Drift reports a replace reason when the Pod no longer runs the image
// it was created from: its container's image was changed (kubectl set
// image) or the kubelet reports another image digest than at create.
func (s *Sandbox) Drift(ctx context.Context, spec sandbox.Spec) (string, error) {
	pod, err := s.getPod(ctx)
	if err != nil || pod == nil {
		return "", err
	}
	s.mu.Lock()
	image, imageID := s.d.Image, s.d.ImageID
	s.mu.Unlock()
	for _, c := range pod.Spec.Containers {
		if c.Name == containerName && c.Image != image {
			return fmt.Sprintf("the image of Pod %s was changed to %q outside agentctl; the sandbox was created from %q", pod.Name, c.Image, image), nil
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == containerName && imageID != "" && cs.ImageID != "" && cs.ImageID != imageID {
			return fmt.Sprintf("Pod %s now runs image %s; the sandbox was created from %s", pod.Name, cs.ImageID, imageID), nil
		}
	}
	return "", nil
}

// PortURL returns a URL for an exposed port: with service = true the
// Service's cluster IP (reachable where cluster IPs route), else
// http://127.0.0.1:PORT of a port-forward this process holds to the
// Pod until the sandbox is stopped or deleted, or the process exits.
func (s *Sandbox) PortURL(ctx context.Context, port int) (string, error) {
	if !slices.Contains(s.spec.Ports, port) {
		return "", fmt.Errorf("port %d is not exposed: list it in the sandbox's ports", port)
	}
	if s.d.Service != "" {
		svc := &corev1.Service{}
		if err := s.p.core.get(ctx, s.d.Namespace, resServices, s.d.Service, svc); err != nil {
			return "", s.p.apiError("reading Service "+s.d.Service, "services (get)", err)
		}
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return "", fmt.Errorf("Service %s has no cluster IP", s.d.Service)
		}
		host := svc.Spec.ClusterIP
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return "http://" + host + ":" + strconv.Itoa(port), nil
	}
	f, err := s.ensureForward(ctx)
	if err != nil {
		return "", err
	}
	local, ok := f.local[port]
	if !ok {
		return "", fmt.Errorf("port %d is not forwarded", port)
	}
	return "http://127.0.0.1:" + strconv.Itoa(local), nil
}
