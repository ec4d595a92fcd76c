package local_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

var testAccounts = sandbox.Accounts{
	Users:  []sandbox.User{{Name: "alice", UID: 2001}, {Name: "bob", UID: 2002}},
	Groups: []sandbox.Group{{Name: "dev", GID: 3000, Users: []string{"alice"}}},
}

func runAs(t *testing.T, sb sandbox.Sandbox, user, script string) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: script, User: user})
	if err != nil {
		t.Fatalf("exec %q as %s: %v", script, user, err)
	}
	return res
}

func TestManifestUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		// Refused, with the reason, rather than run as the wrong user.
		_, err := local.New(local.Options{}).Create(context.Background(), sandbox.Spec{Address: "sandbox.u", StateDir: t.TempDir(), Accounts: testAccounts})
		if err == nil || !strings.Contains(err.Error(), "only root may map ids other than its own") {
			t.Fatalf("create with users as uid %d: %v, want the refusal", os.Geteuid(), err)
		}
		return
	}
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{Accounts: testAccounts})
	ctx := context.Background()

	res := runAs(t, sb, "alice", "id; echo $USER $HOME")
	want := "uid=2001(alice) gid=2001(alice) groups=2001(alice),3000(dev)\nalice /workspace\n"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Fatalf("id as alice = %q (exit %d, %s), want %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
	if res := sh(t, sb, "id -u"); strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("default user id = %q, want 0", res.Stdout)
	}

	// Files a user writes are its own, inside and on disk.
	res = runAs(t, sb, "alice", "echo hi > a.txt && stat -c %U:%G a.txt")
	if got := strings.TrimSpace(string(res.Stdout)); got != "alice:alice" {
		t.Fatalf("owner of a.txt = %q (%s), want alice:alice", got, res.Stderr)
	}
	fi, err := os.Stat(filepath.Join(sb.Dir(), "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 2001 {
		t.Errorf("a.txt is owned by host uid %d, want 2001", uid)
	}

	// Where a user must not write: another user's private directory,
	// another user's file in the shared root (sticky), and files of the
	// sandbox's default user.
	if res := runAs(t, sb, "bob", "mkdir -m 700 mine && echo b > mine/f && echo b > b.txt"); res.ExitCode != 0 {
		t.Fatalf("bob writing his files: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err := sb.WriteFile(ctx, "root.txt", []byte("r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"echo x > mine/g", "cat mine/f", "rm -f b.txt", "echo x >> b.txt", "echo x >> root.txt"} {
		res := runAs(t, sb, "alice", script)
		if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "denied") && !strings.Contains(string(res.Stderr), "not permitted") {
			t.Errorf("alice: %q: exit %d, stderr %q; want permission denied", script, res.ExitCode, res.Stderr)
		}
	}

	// A process on a terminal (exec_command's sessions) runs as the user too.
	p, err := sb.StartProcess(ctx, sandbox.ProcessRequest{Shell: "id -un", TTY: true, User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "bob" {
		t.Errorf("id -un on a terminal as bob = %q", got)
	}

	// A user the manifest does not declare is refused, never run as root.
	_, err = sb.Exec(ctx, sandbox.ExecRequest{Shell: "id", User: "mallory"})
	if _, ok := errors.AsType[*sandbox.UnknownUserError](err); !ok {
		t.Errorf("exec as an undeclared user: %v, want an UnknownUserError", err)
	}
}

func TestManifestUsersIsolationNone(t *testing.T) {
	_, err := local.New(local.Options{Isolation: local.IsolationNone}).Create(context.Background(), sandbox.Spec{Address: "sandbox.u", StateDir: t.TempDir(), Accounts: testAccounts})
	if err == nil || !strings.Contains(err.Error(), "cannot switch users") {
		t.Fatalf("create with users and isolation none: %v, want a refusal", err)
	}
}
