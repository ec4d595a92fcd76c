//go:build linux

package local_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// cgroupSandbox is a namespaced sandbox with resource limits, on a
// machine whose cgroups agentctl can use.
func cgroupSandbox(t *testing.T, r sandbox.Resources) *local.Sandbox {
	t.Helper()
	requireNamespaces(t)
	if err := local.CheckResources(local.IsolationNamespaces, r); err != nil {
		testenv.Missing(t, "memory and CPU limits need a usable cgroup (v2 delegated, or v1 as root): %v", err)
	}
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{Resources: r})
	return sb
}

// sandboxCgroups maps each controller to the host directory of the cgroup
// the sandbox's commands run in, as /proc/self/cgroup inside it says.
func sandboxCgroups(t *testing.T, sb *local.Sandbox) map[string]string {
	t.Helper()
	res := sh(t, sb, "cat /proc/self/cgroup")
	if res.ExitCode != 0 {
		t.Fatalf("cat /proc/self/cgroup: exit %d: %s", res.ExitCode, res.Stderr)
	}
	dirs := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			dirs["unified"] = filepath.Join("/sys/fs/cgroup", parts[2])
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			dirs[c] = filepath.Join("/sys/fs/cgroup", parts[1], parts[2])
		}
	}
	return dirs
}

// TestMemoryLimitEnforced: a sandbox with memory = 64 cannot allocate
// 256 MiB (the kernel kills the command), can allocate 8 MiB, and its
// cgroup is gone once the sandbox is deleted.
func TestMemoryLimitEnforced(t *testing.T) {
	sb := cgroupSandbox(t, sandbox.Resources{MemoryMB: 64})
	res := sh(t, sb, "dd if=/dev/zero of=/dev/null bs=8M count=1")
	if res.ExitCode != 0 {
		t.Fatalf("allocating 8 MiB under a 64 MiB limit: exit %d: %s", res.ExitCode, res.Stderr)
	}
	res = sh(t, sb, "dd if=/dev/zero of=/dev/null bs=256M count=1")
	if res.ExitCode != 128+9 {
		t.Fatalf("allocating 256 MiB under a 64 MiB limit: exit %d (want 137, killed), stderr %q", res.ExitCode, res.Stderr)
	}
	dirs := sandboxCgroups(t, sb)
	dir := dirs["memory"]
	if dir == "" {
		dir = dirs["unified"]
	}
	if !strings.Contains(filepath.Base(dir), "agentctl-") {
		t.Fatalf("the sandbox's commands run in cgroup %q, not a sandbox cgroup", dir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("sandbox cgroup: %v", err)
	}
	if err := sb.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left after delete (stat: %v)", dir, err)
	}
}

// TestCPULimitEnforced: cpus = 0.5 gives the sandbox's cgroup a quota of
// half a CPU.
func TestCPULimitEnforced(t *testing.T) {
	sb := cgroupSandbox(t, sandbox.Resources{CPUs: 0.5})
	dirs := sandboxCgroups(t, sb)
	var file, want string
	if dir := dirs["cpu"]; dir != "" && !strings.HasSuffix(dir, "/") {
		file, want = filepath.Join(dir, "cpu.cfs_quota_us"), "50000"
	} else {
		file, want = filepath.Join(dirs["unified"], "cpu.max"), "50000 100000"
	}
	if !strings.Contains(filepath.Dir(file), "agentctl-") {
		t.Fatalf("the sandbox's commands run in %s, not a sandbox cgroup", filepath.Dir(file))
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != want {
		t.Errorf("%s = %q, want %q", file, got, want)
	}
}

// TestUnenforceableResources: disk and gpus are always refused, and
// memory, cpus and pids without namespaces.
func TestUnenforceableResources(t *testing.T) {
	for _, tc := range []struct {
		isolation string
		r         sandbox.Resources
		want      string
	}{
		{local.IsolationNamespaces, sandbox.Resources{DiskGB: 1}, "disk and gpus are not enforced"},
		{local.IsolationNamespaces, sandbox.Resources{GPUs: 1}, "disk and gpus are not enforced"},
		{local.IsolationNone, sandbox.Resources{MemoryMB: 64}, `memory is not enforced with isolation "none"`},
		{local.IsolationNone, sandbox.Resources{CPUs: 1, PIDs: 10}, `cpus and pids are not enforced with isolation "none"`},
	} {
		err := local.CheckResources(tc.isolation, tc.r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: %v, want %q", tc.isolation, tc.r, err, tc.want)
		}
	}
}
