package k8stest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestCluster checks the cluster of KubeconfigVar is what the tests
// expect: the node Ready with the images imported, the storage class with
// volumes available, and LimitedUser known but allowed nothing.
func TestCluster(t *testing.T) {
	path := Kubeconfig(t)
	c, err := newClient(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The kubelet lists the node's images in its status at its next
	// status update, up to some seconds after the node is Ready: wait.
	var problems []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		problems = nodeProblems(ctx, t, c)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, p := range problems {
		t.Error(p)
	}

	var class struct{ Provisioner string }
	getJSON(ctx, t, c, "/apis/storage.k8s.io/v1/storageclasses/"+StorageClass, &class)
	if class.Provisioner != "kubernetes.io/no-provisioner" {
		t.Errorf("storage class %s has provisioner %q, want kubernetes.io/no-provisioner", StorageClass, class.Provisioner)
	}
	var pvs struct {
		Items []struct {
			Spec struct {
				StorageClassName string
				Capacity         struct{ Storage string }
			}
			Status struct{ Phase string }
		}
	}
	getJSON(ctx, t, c, "/api/v1/persistentvolumes", &pvs)
	available := 0
	for _, pv := range pvs.Items {
		if pv.Spec.StorageClassName == StorageClass && pv.Status.Phase == "Available" && pv.Spec.Capacity.Storage == "1Gi" {
			available++
		}
	}
	if available == 0 {
		t.Errorf("no Available 1Gi PersistentVolume of class %s", StorageClass)
	}

	// LimitedUser authenticates (403, not 401) and may not list Pods.
	limited, err := newClient(LimitedKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = limited.get(ctx, "/api/v1/namespaces/default/pods")
	var se *statusError
	if !errors.As(err, &se) || se.Code != http.StatusForbidden {
		t.Errorf("%s listing Pods: %v, want 403 Forbidden", LimitedUser, err)
	}
}

// nodeProblems says what is wrong with the cluster's node: not one node,
// not Ready, or without the images.
func nodeProblems(ctx context.Context, t *testing.T, c *client) []string {
	var nodes struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct {
				Conditions []struct{ Type, Status, Message string }
				Images     []struct{ Names []string }
			}
		}
	}
	getJSON(ctx, t, c, "/api/v1/nodes", &nodes)
	if len(nodes.Items) != 1 {
		return []string{fmt.Sprintf("%d nodes, want the 1 of cluster.sh", len(nodes.Items))}
	}
	node := nodes.Items[0]
	var problems []string
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == "Ready" && cond.Status == "True" {
			ready = true
		}
	}
	if !ready {
		problems = append(problems, fmt.Sprintf("node %s is not Ready: %+v", node.Metadata.Name, node.Status.Conditions))
	}
	var images []string
	for _, img := range node.Status.Images {
		images = append(images, img.Names...)
	}
	for _, want := range []string{Image, UsersImage} {
		if !slices.Contains(images, want) {
			problems = append(problems, fmt.Sprintf("image %s is not on node %s (it has %v)", want, node.Metadata.Name, images))
		}
	}
	return problems
}

func getJSON(ctx context.Context, t *testing.T, c *client, path string, v any) {
	t.Helper()
	body, err := c.get(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func TestNewClientFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("kubeconfig", "apiVersion: v1\nclusters:\n- cluster:\n    server: http://127.0.0.1:1\n")
	if _, err := newClient(filepath.Join(dir, "kubeconfig")); err == nil {
		t.Error("newClient accepted a server that is not https")
	}
	write("kubeconfig", "clusters:\n- cluster:\n    server: https://127.0.0.1:1\n    certificate-authority: ca.crt\n")
	if _, err := newClient(filepath.Join(dir, "kubeconfig")); err == nil {
		t.Error("newClient accepted a kubeconfig whose CA file is missing")
	}
}

func TestKubeconfigMissing(t *testing.T) {
	t.Setenv("AGENTCTL_TEST_STRICT", "")
	t.Setenv(KubeconfigVar, filepath.Join(t.TempDir(), "none"))
	ok := t.Run("missing", func(t *testing.T) {
		Kubeconfig(t)
		t.Error("Kubeconfig returned for a file that is not there")
	})
	if !ok {
		t.Error("Kubeconfig failed instead of skipping without strict mode")
	}
}
