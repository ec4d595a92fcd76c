//go:build tools

// Package build pins the Kubernetes programs that test/kubernetes/cluster.sh
// builds; it is never compiled (the build tag keeps it out), only read by
// go mod tidy so that go.mod and go.sum hold what the programs need.
package build

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
