//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const consoleConfig = `
variable "name" {
  default = "world"
}
provider "scripted" {
  script "analyst" {
    reply { text = "Q3 was best." }
  }
}
agent "analyst" {
  provider = provider.scripted
  model    = "demo"
}
run "first" {
  agent = agent.analyst
  input = "Which quarter was best?"
}
`

// TestConsoleInteractive types into agentctl console on a terminal: it
// prompts, prints values, shows an error and goes on, holds no state
// lock while it waits for a line (an apply succeeds meanwhile), and ends
// on exit.
func TestConsoleInteractive(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(consoleConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	h.mustRun("apply", "-auto-approve", "-no-color")
	master, slave := openPTY(t)
	p := h.startOn(slave, nil, "console", "-no-color")
	prompts := 0
	typeLine := func(line string, want string) {
		t.Helper()
		prompts++
		h.waitUntil(fmt.Sprintf("prompt %d", prompts), func() bool { return strings.Count(p.out.String(), "> ") >= prompts })
		if _, err := master.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
		if want != "" {
			h.waitUntil(want, func() bool { return strings.Contains(p.out.String(), want) })
		}
	}
	typeLine("run.first.output", `"Q3 was best."`)
	typeLine("var.nmae", `on <stdin> line 2:`)
	typeLine("upper(var.name)", `"WORLD"`)
	if out, errOut, code := h.run("apply", "-auto-approve", "-no-color", "-replace=run.first"); code != 0 {
		t.Fatalf("apply while the console waits for a line: exit %d\n%s%s\nconsole:\n%s", code, out, errOut, p.out)
	}
	typeLine("exit", "")
	if code := p.wait(t); code != 0 {
		t.Fatalf("console: exit %d\n%s", code, p.out)
	}
	if !strings.Contains(p.out.String(), "This object does not have an attribute named \"nmae\"") {
		t.Errorf("the error is not shown:\n%s", p.out)
	}
}
