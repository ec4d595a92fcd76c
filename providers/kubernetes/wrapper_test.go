package kubernetes

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// The shell wrapper every command runs under, run here by the host's
// /bin/sh: the environment arrives through stdin (never in the command,
// which the API server may log), values keep newlines and quotes, and
// the command's own stdin follows it intact.
func TestWrapperPassesEnvThroughStdin(t *testing.T) {
	dir := t.TempDir()
	cmd := command{argv: []string{"sh", "-c", `pwd; printf '%s|' "$A" "$B" "$` + sandbox.ExecMarkerEnv + `"; cat; echo "$1"`, "x", "-c"}, prog: "sh", marker: "m1", wd: dir,
		env: "export A='two\nlines'\nexport B='it'\\''s'\n"}
	argv := cmd.wrapper("")
	if strings.Contains(strings.Join(argv, " "), "two") {
		t.Fatalf("the environment is in the command: %q", argv)
	}
	var out, errOut bytes.Buffer
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = cmd.stdin(strings.NewReader("input\nmore")), &out, &errOut
	if err := c.Run(); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if want := dir + "\ntwo\nlines|it's|m1|input\nmore-c\n"; out.String() != want {
		t.Fatalf("wrapper output %q, want %q", out.String(), want)
	}
	// Without environment nothing is read from stdin.
	cmd.env = ""
	argv = cmd.wrapper("")
	out.Reset()
	c = exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout = cmd.stdin(strings.NewReader("all of it")), &out
	if err := c.Run(); err != nil || !strings.Contains(out.String(), "||m1|all of it") {
		t.Fatalf("without env: %q %v", out.String(), err)
	}
}
