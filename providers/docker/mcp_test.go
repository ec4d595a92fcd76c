package docker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/tools/toolstest"
)

// TestMCPServerInContainer runs the go-sdk's everything server inside a
// container through StartProcess (an exec with attached stdin): listed,
// called, and gone from the container once closed.
func TestMCPServerInContainer(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	ctx := context.Background()
	s := toolstest.EverythingIn(t, sb, nil, nil)
	out, err := s.Call(ctx, "greet", `{"name":"container"}`)
	if err != nil || out.Text != "Hi container" {
		t.Fatalf("greet in the container: %q, %v", out.Text, err)
	}
	const count = `grep -l "bin/everythin[g]" /proc/[0-9]*/cmdline 2>/dev/null | wc -l`
	if n := strings.TrimSpace(execOK(t, sb, count)); n == "0" {
		t.Fatal("no server process in the container while the session is open")
	}
	s.Close()
	deadline := time.Now().Add(15 * time.Second)
	for strings.TrimSpace(execOK(t, sb, count)) != "0" {
		if time.Now().After(deadline) {
			t.Fatal("the server still runs in the container after Close")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
