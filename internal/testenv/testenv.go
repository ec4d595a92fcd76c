// Package testenv decides what a test does when the machine lacks
// something it needs (git, util-linux, user namespaces, a Docker Engine):
// on a developer's machine it skips with the reason; under
// AGENTCTL_TEST_STRICT=1, which .ci/run sets after installing everything
// the tests need, it fails, so CI never passes with a test skipped for
// want of a prerequisite.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// StrictVar is the environment variable that turns a missing
// prerequisite into a failure.
const StrictVar = "AGENTCTL_TEST_STRICT"

// Strict reports whether missing prerequisites fail tests.
func Strict() bool { return os.Getenv(StrictVar) == "1" }

// Missing stops tb for a missing prerequisite described by format and
// args: a failure under AGENTCTL_TEST_STRICT=1, a skip otherwise.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if Strict() {
		tb.Fatalf("%s=1 but a prerequisite is missing: %s", StrictVar, msg)
	}
	tb.Skipf("skipping: %s (set %s=1 to make this a failure)", msg, StrictVar)
}
