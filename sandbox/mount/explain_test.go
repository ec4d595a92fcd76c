//go:build linux

package mount

import (
	"strings"
	"testing"
)

// rclone's output names ports, times and sizes: the digits 401 in them
// are not an HTTP 401, and an anonymous Azure listing that finds no
// container still says the container does not exist or is private.
func TestExplainReadsStatusesNotDigits(t *testing.T) {
	anon := Def{Kind: KindAzure}
	out := "2026/11/28 19:04:01 ERROR : error listing: http://127.0.0.1:44013/dealroom took 1.401s\nFailed to lsf: error in ListJSON: directory not found"
	if got := explain(anon, out); !strings.Contains(got, "does not exist or is private") {
		t.Errorf("explain(%q) = %q, want the container named missing or private", out, got)
	}
	if got := explain(anon, "googleapi: Error 401: Invalid Credentials"); !strings.Contains(got, "refused the credentials") {
		t.Errorf("a 401 is not read as refused credentials: %q", got)
	}
}
