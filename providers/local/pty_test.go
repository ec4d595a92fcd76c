package local_test

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// ptyOutput runs script on a terminal of rows x cols in sb (as user, ""
// for the default) and returns its output, with the terminal's CRLF line
// ends made LF.
func ptyOutput(t *testing.T, sb sandbox.ProcessStarter, user, script string, rows, cols int) string {
	t.Helper()
	p, err := sb.StartProcess(context.Background(), sandbox.ProcessRequest{Shell: script, TTY: true, Rows: rows, Cols: cols, User: user})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	done := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(p.Stdout())
		done <- b
	}()
	var out []byte
	select {
	case out = <-done:
	case <-time.After(30 * time.Second):
		p.Kill()
		t.Fatalf("%q on a terminal did not end", script)
	}
	if code, err := p.Wait(); err != nil || code != 0 {
		t.Fatalf("%q on a terminal: exit %d, %v; output %q", script, code, err, out)
	}
	return strings.ReplaceAll(string(out), "\r\n", "\n")
}

// ttyScript prints the terminal's name as ttyname(3) finds it, T0 when
// stdin is a terminal, and the terminal's size; then checks that the
// name is a terminal device the command can open.
const ttyScript = `t=$(tty); echo "$t"; test -t 0 && echo T0; stty size; test -c "$t" && echo </dev/tty && echo OPEN`

var ptsName = regexp.MustCompile(`^/dev/pts/[0-9]+$`)

// checkTTYOutput expects ttyScript's output on a terminal of 33 x 101.
func checkTTYOutput(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 4 || !ptsName.MatchString(lines[0]) || lines[1] != "T0" || lines[2] != "33 101" || lines[len(lines)-1] != "OPEN" {
		t.Fatalf("on a terminal, %q printed %q; want the terminal's /dev/pts/N name, T0, its size \"33 101\", OPEN", ttyScript, out)
	}
}

// TestProcessTerminalIsARealTerminal: a process on a terminal finds its
// terminal by name (ttyname(3), as tty(1) and ssh do) at the path the
// name says, of the size it was started with.
func TestProcessTerminalIsARealTerminal(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		checkTTYOutput(t, ptyOutput(t, sb, "", ttyScript, 33, 101))
		// Each process has a terminal of its own, of the size it asked for.
		if out := ptyOutput(t, sb, "", "stty size", 40, 132); strings.TrimSpace(out) != "40 132" {
			t.Errorf("stty size on a 40x132 terminal = %q", out)
		}
	})
}

// TestProcessTerminalOfAUser: a manifest user's terminal is its own.
func TestProcessTerminalOfAUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("manifest users need root or a user namespace of agentctl's own (TestManifestUsers)")
	}
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{Accounts: testAccounts})
	checkTTYOutput(t, ptyOutput(t, sb, "bob", ttyScript, 33, 101))
	if out := ptyOutput(t, sb, "bob", `stat -c %U "$(tty)"`, 0, 0); strings.TrimSpace(out) != "bob" {
		t.Errorf("bob's terminal is owned by %q, want bob", out)
	}
}
