package local_test

import (
	"testing"

	"github.com/agentctl/agentctl/engine/sandbox"
	"github.com/agentctl/agentctl/providers/local"
)

const helperEnv = "AGENTCTL_LOCAL_TEST_HELPER"

func runHelper(h string) int { return 3 }

func TestSmoke(t *testing.T) {
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{})
	res := sh(t, sb, "echo hi; id; ls -la /; cat /etc/passwd; ls -la /workspace /tmp /dev; cat /proc/self/status | grep -i cap; hostname; ip addr 2>&1 || cat /proc/net/dev; echo x > /workspace/f; ls -ln /workspace")
	t.Logf("code=%d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
}
