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

// With an end marker, the wrapper prints it on both streams once the
// command has exited, keeps the command's exit status (a failed cd, a
// missing program, a signal), and the command's environment carries the
// tree marker while the shell printing the end does not.
func TestWrapperPrintsTheEndAfterTheCommand(t *testing.T) {
	dir := t.TempDir()
	const end = "agentctl-exec-end-test"
	for _, c := range []struct {
		argv         []string
		wd           string
		code         int
		stdout, errs string
	}{
		{[]string{"sh", "-c", `echo out; echo err >&2; printf '%s' "$` + sandbox.ExecMarkerEnv + `"; exit 3`}, dir, 3, "out\nm1", "err\n"},
		{[]string{"sh", "-c", "kill -9 $$"}, dir, 137, "", ""},
		{[]string{"true"}, dir + "/missing", 126, "", "*"},
		{[]string{"/no/such/program"}, dir, 127, "", "*"},
	} {
		cmd := command{argv: c.argv, prog: c.argv[0], marker: "m1", wd: c.wd, end: end}
		argv := cmd.wrapper("")
		var out, errOut bytes.Buffer
		x := exec.Command(argv[0], argv[1:]...)
		x.Stdout, x.Stderr = &out, &errOut
		err := x.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		o, e := out.String(), errOut.String()
		if code != c.code || !strings.HasSuffix(o, end) || !strings.HasSuffix(e, end) {
			t.Fatalf("%q: exit %d (want %d), stdout %q, stderr %q: the end must follow the command on both streams", c.argv, code, c.code, o, e)
		}
		if o = strings.TrimSuffix(o, end); o != c.stdout {
			t.Fatalf("%q: stdout %q, want %q", c.argv, o, c.stdout)
		}
		if e = strings.TrimSuffix(e, end); c.errs != "*" && e != c.errs {
			t.Fatalf("%q: stderr %q, want %q", c.argv, e, c.errs)
		}
	}
}
