// Package sandboxtest is the sandbox contract's conformance suite
// (TestSandbox), which every provider's tests run, and the checks of it
// that providers' own tests share, so that each provider is held to the
// same behaviour. Used by tests only.
package sandboxtest

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// Accounts are the manifest accounts the user checks expect: alice (uid
// 2001) and bob (uid 2002), each with a private group of its own id, and
// group dev (gid 3000) with alice in it.
func Accounts() sandbox.Accounts {
	return sandbox.Accounts{
		Users:  []sandbox.User{{Name: "alice", UID: 2001}, {Name: "bob", UID: 2002}},
		Groups: []sandbox.Group{{Name: "dev", GID: 3000, Users: []string{"alice"}}},
	}
}

// ExecAs runs script in sb as user (timeout 0: the provider's default)
// and fails the test when it cannot be run at all.
func ExecAs(t testing.TB, sb sandbox.Sandbox, user, script string, timeout time.Duration) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: script, User: user, Timeout: timeout})
	if err != nil {
		t.Fatalf("exec %q as %s: %v", script, user, err)
	}
	return res
}

// CheckDenied runs each script as user and expects it to fail with a
// permission error.
func CheckDenied(t testing.TB, sb sandbox.Sandbox, user string, timeout time.Duration, scripts ...string) {
	t.Helper()
	for _, script := range scripts {
		res := ExecAs(t, sb, user, script, timeout)
		if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "denied") && !strings.Contains(string(res.Stderr), "not permitted") {
			t.Errorf("%s: %q: exit %d, stderr %q; want permission denied", user, script, res.ExitCode, res.Stderr)
		}
	}
}

// CheckProcessUser starts script as user as an attached process, on a
// terminal when tty is set, and expects the last line of its output to
// be want. On a terminal the last line only has to end with want: a
// provider whose terminals start a login shell and type the command
// (Daytona) shows that line's echo first, and the shell's prompt may
// land before the command's output.
func CheckProcessUser(t testing.TB, sb sandbox.Sandbox, user, script string, tty bool, want string) {
	t.Helper()
	ps, ok := sb.(sandbox.ProcessStarter)
	if !ok {
		t.Fatalf("%T starts no processes", sb)
	}
	p, err := ps.StartProcess(context.Background(), sandbox.ProcessRequest{Shell: script, TTY: tty, User: user})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	got := strings.TrimSpace(lines[len(lines)-1])
	if got != want && !(tty && strings.HasSuffix(got, " "+want)) {
		t.Errorf("tty %v: %q as %s = %q, want %q (all output %q)", tty, script, user, got, want, out)
	}
}

// CheckNamed expects a command run as alice (Accounts) to see the
// accounts by name, as the sandbox's own passwd and group files have
// them, with the workspace root, root, as its working directory: what
// providers whose images hold the accounts show (sandboxes of the
// Daytona fake have ids without names).
func CheckNamed(t testing.TB, sb sandbox.Sandbox, root string) {
	t.Helper()
	res := ExecAs(t, sb, "alice", "id; pwd", 0)
	want := "uid=2001(alice) gid=2001(alice) groups=2001(alice),3000(dev)\n" + root + "\n"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Errorf("id as alice = %q (exit %d, %s), want %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
}

// CheckUnknownUser expects a command as a user the manifest does not
// declare to be refused with an UnknownUserError, never run as another.
func CheckUnknownUser(t testing.TB, sb sandbox.Sandbox) {
	t.Helper()
	_, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: "id", User: "mallory"})
	var unknown *sandbox.UnknownUserError
	if !errors.As(err, &unknown) {
		t.Errorf("exec as an undeclared user: %v, want an UnknownUserError", err)
	}
}

// testUsers: the manifest's users exist with their ids and groups, own
// what they write, are kept out of each other's files, run processes
// (on a terminal or not) and get the request's environment; a timeout
// kills a user's process tree; an undeclared user is refused. A provider
// lacking users refuses them at validation and at Create.
func (s *suite) testUsers(t *testing.T) {
	want := sandbox.Spec{Accounts: Accounts()}
	if why, lacks := sandbox.Lacks(s.f.Provider, sandbox.CapabilityUsers); lacks {
		s.checkRefused(t, sandbox.CapabilityUsers, why, want, suiteRanges.Manifest, "user")
		return
	}
	sb, _ := s.create(t, want)
	res := ExecAs(t, sb, "alice", "id -u; id -g; id -G", 0)
	if got := string(res.Stdout); got != "2001\n2001\n2001 3000\n" || res.ExitCode != 0 {
		t.Errorf("a command run as alice does not have her ids (uid 2001, gid 2001, groups 2001 3000): %q, exit %d, %s", got, res.ExitCode, res.Stderr)
	}
	res = ExecAs(t, sb, "alice", "echo hi > a.txt && stat -c %u:%g a.txt", 0)
	if got := strings.TrimSpace(string(res.Stdout)); got != "2001:2001" {
		t.Errorf("a file alice writes is owned by %q (%s), want 2001:2001", got, res.Stderr)
	}
	if res := ExecAs(t, sb, "bob", "mkdir -m 700 mine && echo b > mine/f && echo b > b.txt", 0); res.ExitCode != 0 {
		t.Fatalf("bob could not write his own files: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err := sb.WriteFile(ctx(t), "root.txt", []byte("r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	CheckDenied(t, sb, "alice", 0, "echo x > mine/g", "cat mine/f", "rm -f b.txt", "echo x >> b.txt", "echo x >> root.txt")
	for _, tty := range []bool{false, true} {
		CheckProcessUser(t, sb, "bob", "id -u", tty, "2002")
	}
	res, err := sb.Exec(ctx(t), sandbox.ExecRequest{Shell: `echo "$GREETING"`, User: "alice", Env: map[string]string{"GREETING": "hi 'there'"}})
	if err != nil || string(res.Stdout) != "hi 'there'\n" {
		t.Errorf("the request's environment did not reach a command run as alice: %q, %s", res.Stdout, describe(err))
	}
	t.Run("timeout-kills-tree", func(t *testing.T) { checkTimeoutKillsTree(t, sb, "alice", s.sessions(t)) })
	CheckUnknownUser(t, sb)
}
