package daytona

import (
	"errors"
	"testing"

	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/sandbox"
)

// TestAbsFollowsTheWorkspacePathPolicy: workspace paths are checked by
// sandbox.CleanPath, as for every provider, then made absolute.
func TestAbsFollowsTheWorkspacePathPolicy(t *testing.T) {
	w := &Workspace{spec: sandbox.Spec{Address: "sandbox.box"}, root: "/home/daytona/workspace"}
	ok := map[string]string{
		"":                               "/home/daytona/workspace",
		".":                              "/home/daytona/workspace",
		"a/b/":                           "/home/daytona/workspace/a/b",
		"a/../b":                         "/home/daytona/workspace/b",
		"/home/daytona/workspace/x":      "/home/daytona/workspace/x",
		"/home/daytona/workspace/a/../y": "/home/daytona/workspace/y",
	}
	for in, want := range ok {
		if got, err := hosted.Abs(w.root, in); err != nil || got != want {
			t.Errorf("abs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "../x", "a/../../workspace/x", "/home/daytona/other", "/etc/passwd", "a\\b", "a\x00b", "a\nb"} {
		if _, err := hosted.Abs(w.root, in); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("abs(%q) = %v, want ErrPathEscape", in, err)
		}
	}
}
