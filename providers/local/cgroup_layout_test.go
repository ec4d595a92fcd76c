//go:build linux

package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testfiles"
)

// The cgroup v2 path cannot run on a cgroup v1 machine; these tests check
// what it writes against a directory laid out as the kernel lays out
// cgroupfs (the kernel's own behaviour is TestMemoryLimitEnforced's).

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestCgroupV2Delegated(t *testing.T) {
	root := t.TempDir()
	self := strconv.Itoa(os.Getpid())
	testfiles.WriteTree(t, root, map[string]string{
		"cgroup.controllers":                          "cpuset cpu io memory pids",
		"user.slice/run.scope/cgroup.controllers":     "cpu memory pids",
		"user.slice/run.scope/cgroup.subtree_control": "",
		"user.slice/run.scope/cgroup.procs":           self + "\n",
	})
	h := detectCgroups(root, []byte("0::/user.slice/run.scope\n"))
	if err := h.check(cgroupLimits{MemoryBytes: 64 << 20, CPUs: 0.5}); err != nil {
		t.Fatal(err)
	}
	g, err := h.create("agentctl-sb", cgroupLimits{MemoryBytes: 64 << 20, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	scope := filepath.Join(root, "user.slice/run.scope")
	if got := readFile(t, filepath.Join(scope, "agentctl/cgroup.procs")); got != self {
		t.Errorf("agentctl moved itself to %q, want its pid %s in the leaf", got, self)
	}
	if got := readFile(t, filepath.Join(scope, "cgroup.subtree_control")); got != "+memory +cpu" {
		t.Errorf("subtree_control = %q", got)
	}
	if got := readFile(t, filepath.Join(scope, "agentctl-sb/memory.max")); got != "67108864" {
		t.Errorf("memory.max = %q", got)
	}
	if got := readFile(t, filepath.Join(scope, "agentctl-sb/cpu.max")); got != "50000 100000" {
		t.Errorf("cpu.max = %q", got)
	}
	if err := g.add(4242); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(scope, "agentctl-sb/cgroup.procs")); got != "4242" {
		t.Errorf("cgroup.procs = %q", got)
	}
}

func TestCgroupV2NotUsable(t *testing.T) {
	root := t.TempDir()
	testfiles.WriteTree(t, root, map[string]string{
		"cgroup.controllers":                  "cpu memory",
		"a/cgroup.controllers":                "cpu pids",
		"a/cgroup.subtree_control":            "",
		"a/cgroup.procs":                      "1\n" + strconv.Itoa(os.Getpid()),
		"b/cgroup.controllers":                "cpu memory",
		"b/cgroup.subtree_control":            "",
		"b/cgroup.procs":                      "1\n",
		"b/agentctl-x/placeholder-for-mkdirs": "",
	})
	h := detectCgroups(root, []byte("0::/a"))
	if err := h.check(cgroupLimits{MemoryBytes: 1 << 20}); err == nil || !strings.Contains(err.Error(), "memory controller is not delegated") {
		t.Errorf("memory not delegated: %v", err)
	}
	if err := h.check(cgroupLimits{CPUs: 1}); err != nil {
		t.Errorf("cpu is delegated: %v", err)
	}
	h = detectCgroups(root, []byte("0::/b"))
	if _, err := h.create("agentctl-x", cgroupLimits{CPUs: 1}); err == nil || !strings.Contains(err.Error(), "holds other processes") {
		t.Errorf("shared cgroup: %v", err)
	}
}

func TestCgroupV1(t *testing.T) {
	root := t.TempDir()
	testfiles.WriteTree(t, root, map[string]string{
		"memory/job/memory.limit_in_bytes":   "9223372036854771712",
		"cpu,cpuacct/job/cpu.cfs_quota_us":   "-1",
		"pids/job/pids.max":                  "max",
		"memory/job/agentctl-s/cgroup.procs": "",
	})
	h := detectCgroups(root, []byte("9:pids:/job\n4:memory:/job\n2:cpu,cpuacct:/job\n1:name=systemd:/\n"))
	if h.v2 {
		t.Fatal("detected v2")
	}
	if _, err := h.create("agentctl-s", cgroupLimits{MemoryBytes: 128 << 20, CPUs: 2}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(root, "memory/job/agentctl-s/memory.limit_in_bytes")); got != "134217728" {
		t.Errorf("memory.limit_in_bytes = %q", got)
	}
	if got := readFile(t, filepath.Join(root, "cpu,cpuacct/job/agentctl-s/cpu.cfs_quota_us")); got != "200000" {
		t.Errorf("cpu.cfs_quota_us = %q", got)
	}
	if err := (&cgroupHost{why: map[string]string{}}).check(cgroupLimits{}); err != nil {
		t.Errorf("no limits: %v", err)
	}
	h = detectCgroups(root, []byte("9:pids:/job\n"))
	if err := h.check(cgroupLimits{MemoryBytes: 1}); err == nil || !strings.Contains(err.Error(), "no memory cgroup") {
		t.Errorf("no memory hierarchy: %v", err)
	}
}
