package local_test

import (
	"context"
	"os"
	"testing"

	"github.com/agentctl/agentctl/cmd/agentctl/clitest"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

func TestMain(m *testing.M) {
	local.MaybeRunInit()
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	code := m.Run()
	agentctlBin.Remove()
	os.Exit(code)
}

// agentctlBin is cmd/agentctl, built for the tests that run it.
var agentctlBin clitest.Binary

// newSandbox creates a sandbox in a temporary state directory, deleted
// with the test.
func newSandbox(t testing.TB, opts local.Options, spec sandbox.Spec) (*local.Sandbox, string) {
	t.Helper()
	stateDir := t.TempDir()
	if spec.StateDir == "" {
		spec.StateDir = stateDir
	}
	if spec.Address == "" {
		spec.Address = "sandbox.test"
	}
	sb, err := local.New(opts).Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Delete(context.Background()); err != nil {
			t.Errorf("delete: %v", err)
		}
	})
	return sb.(*local.Sandbox), stateDir
}

func sh(t testing.TB, sb sandbox.Sandbox, script string) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: script})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}
