//go:build linux

package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const execPipeline = `
provider "local" {}
sandbox "box" {
  provider = provider.local
}
`

// TestExecIT: agentctl exec -it gives a shell on a terminal in the
// sandbox, driven from the keyboard (a pseudo-terminal here); -i pipes
// input; -t without a terminal is refused.
func TestExecIT(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(execPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	h.mustRun("apply", "-auto-approve", "-no-color")

	master, slave := openPTY(t)
	p := h.startOn(slave, nil, "exec", "-it", "sandbox.box", "--", "sh")
	slave.Close()
	if _, err := io.WriteString(master, "if [ -t 0 ]; then echo on-a-tty-$((1+1)); fi; exit 5\n"); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 5 {
		t.Fatalf("exec -it exit %d, want 5; output:\n%s", code, p.out)
	}
	if !strings.Contains(p.out.String(), "on-a-tty-2") {
		t.Fatalf("the shell's output:\n%s", p.out)
	}

	cmd := h.command("exec", "-i", "sandbox.box", "--", "sh")
	cmd.Stdin = strings.NewReader("echo piped-$((2+3))\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "piped-5") {
		t.Fatalf("exec -i: %v\n%s", err, out)
	}

	cmd = h.command("exec", "-t", "sandbox.box", "--", "true")
	cmd.Stdin = strings.NewReader("")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-t needs standard input to be a terminal") {
		t.Fatalf("exec -t without a terminal: %v\n%s", err, out)
	}
}
