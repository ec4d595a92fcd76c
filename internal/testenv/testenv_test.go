package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissing runs a test that calls Missing in a child process, with and
// without AGENTCTL_TEST_STRICT=1, and checks it skips or fails.
func TestMissing(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		Missing(t, "frobnicator not installed")
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		strict   string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP: TestMissing"},
		{"1", true, "--- FAIL: TestMissing"},
	} {
		cmd := exec.Command(exe, "-test.run=^TestMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", StrictVar+"="+tc.strict)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.wantFail || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "frobnicator not installed") {
			t.Errorf("%s=%q: err %v, output:\n%s", StrictVar, tc.strict, err, out)
		}
	}
}
