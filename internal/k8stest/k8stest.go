// Package k8stest hands tests the single-node Kubernetes cluster that
// test/kubernetes/cluster.sh starts (.ci/run starts one before the tests
// and stops it after): the path of its kubeconfig, and the names of what
// the setup put into it (images imported into its containerd, a storage
// class with volumes made ahead). With no cluster, a test skips with the
// reason (a failure under AGENTCTL_TEST_STRICT=1, see internal/testenv).
package k8stest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/internal/testenv"
)

// KubeconfigVar names the environment variable holding the path of the
// test cluster's kubeconfig (cluster.sh prints it when the cluster is up).
const KubeconfigVar = "AGENTCTL_TEST_KUBECONFIG"

// What cluster.sh puts into the cluster. The images are imported into
// the node's containerd, never pulled (the machine has no registry), so
// a Pod using them must not ask for a pull (their tags are not "latest",
// so the default pull policy, IfNotPresent, holds).
const (
	// Image is a scratch image holding Debian's static busybox, its
	// applets linked in /bin, as the Docker provider's test image.
	Image = "agentctl.test/busybox:1"
	// UsersImage is Image plus the host's useradd, groupadd and usermod
	// with the libraries they need, for the manifest-user checks.
	UsersImage = "agentctl.test/busybox-users:1"
	// StorageClass has PersistentVolumes made ahead by cluster.sh (no
	// dynamic provisioner runs), for claims of up to 1Gi each.
	StorageClass = "agentctl-test"
	// LimitedUser is the user of LimitedKubeconfig's client certificate:
	// no groups, and no permissions until a test binds a Role to it.
	LimitedUser = "agentctl-limited"
)

// Kubeconfig returns the path of the test cluster's kubeconfig from
// KubeconfigVar, or stops tb (skip, or fail under strict mode) when it is
// unset or names no file.
func Kubeconfig(tb testing.TB) string {
	tb.Helper()
	path := os.Getenv(KubeconfigVar)
	if path == "" {
		testenv.Missing(tb, "no Kubernetes test cluster: start one with test/kubernetes/cluster.sh up and set %s to the kubeconfig it prints", KubeconfigVar)
		return ""
	}
	if _, err := os.Stat(path); err != nil {
		testenv.Missing(tb, "%s=%s: %v (start the cluster with test/kubernetes/cluster.sh up)", KubeconfigVar, path, err)
		return ""
	}
	if err := answers(path); err != nil {
		testenv.Missing(tb, "the Kubernetes test cluster of %s=%s does not answer: %v (is it still up? test/kubernetes/cluster.sh up starts one)", KubeconfigVar, path, err)
		return ""
	}
	return path
}

// LimitedKubeconfig returns the path of the kubeconfig of LimitedUser,
// beside the one Kubeconfig returns (cluster.sh writes it as
// kubeconfig-limited), stopping tb as Kubeconfig does when there is none.
// LimitedUser may do nothing until a test grants it a Role: a test binds
// the permissions it documents and proves they suffice.
func LimitedKubeconfig(tb testing.TB) string {
	tb.Helper()
	main := Kubeconfig(tb)
	if main == "" {
		return ""
	}
	path := filepath.Join(filepath.Dir(main), "kubeconfig-limited")
	if _, err := os.Stat(path); err != nil {
		testenv.Missing(tb, "no kubeconfig of %s beside %s: %v (test/kubernetes/cluster.sh up writes one)", LimitedUser, main, err)
		return ""
	}
	return path
}

// answered caches, per kubeconfig path, whether its API server answered
// /readyz: asked once per test binary, not once per test.
var (
	answeredMu sync.Mutex
	answered   = map[string]error{}
)

func answers(path string) error {
	answeredMu.Lock()
	defer answeredMu.Unlock()
	if err, ok := answered[path]; ok {
		return err
	}
	err := readyz(path)
	answered[path] = err
	return err
}
