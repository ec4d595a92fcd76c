//go:build linux

package local_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// TestShmBounded: a namespaced sandbox's /dev/shm holds local.ShmSizeMB,
// and writing past it fails instead of taking the host's memory.
func TestShmBounded(t *testing.T) {
	sb, _ := escapeSandbox(t, sandbox.Spec{})
	res := sh(t, sb, "df -k /dev/shm | awk 'NR==2 {print $2}'")
	if got, want := string(res.Stdout), fmt.Sprintf("%d\n", local.ShmSizeMB*1024); got != want {
		t.Errorf("/dev/shm size: %q KiB (stderr %q), want %q", got, res.Stderr, want)
	}
	res = sh(t, sb, fmt.Sprintf("dd if=/dev/zero of=/dev/shm/big bs=1M count=%d", local.ShmSizeMB+16))
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Errorf("writing %d MiB to /dev/shm: exit %d, stderr %q", local.ShmSizeMB+16, res.ExitCode, res.Stderr)
	}
}

// TestUnenforcedResources: resources the local provider cannot enforce
// are refused at create, not ignored.
func TestUnenforcedResources(t *testing.T) {
	for _, r := range []sandbox.Resources{{DiskGB: 1}, {GPUs: 1}} {
		_, err := local.New(local.Options{}).Create(context.Background(), sandbox.Spec{
			Address: "sandbox.test", StateDir: t.TempDir(), Resources: r,
		})
		if err == nil || !strings.Contains(err.Error(), "disk and gpus are not enforced") {
			t.Errorf("resources %+v: %v", r, err)
		}
	}
	_, err := local.New(local.Options{Isolation: local.IsolationNone}).Create(context.Background(), sandbox.Spec{
		Address: "sandbox.test", StateDir: t.TempDir(), Resources: sandbox.Resources{PIDs: 64},
	})
	if err == nil || !strings.Contains(err.Error(), `pids is not enforced with isolation "none"`) {
		t.Errorf("pids without isolation: %v", err)
	}
}
