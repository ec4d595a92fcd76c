package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

var testAccounts = sandboxtest.Accounts()

func TestManifestUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		// Refused, with the reason, rather than run as the wrong user.
		_, err := local.New(local.Options{}).Create(context.Background(), sandbox.Spec{Address: "sandbox.u", StateDir: t.TempDir(), Accounts: testAccounts})
		if err == nil || !strings.Contains(err.Error(), "may map only its own id") {
			t.Fatalf("create with users as uid %d: %v, want the refusal", os.Geteuid(), err)
		}
		return
	}
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{Accounts: testAccounts})
	ctx := context.Background()

	res := sandboxtest.ExecAs(t, sb, "alice", "id; echo $USER $HOME", 0)
	want := "uid=2001(alice) gid=2001(alice) groups=2001(alice),3000(dev)\nalice /workspace\n"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Fatalf("id as alice = %q (exit %d, %s), want %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
	if res := sh(t, sb, "id -u"); strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("default user id = %q, want 0", res.Stdout)
	}

	// Files a user writes are its own, inside and on disk.
	res = sandboxtest.ExecAs(t, sb, "alice", "echo hi > a.txt && stat -c %U:%G a.txt", 0)
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
	if res := sandboxtest.ExecAs(t, sb, "bob", "mkdir -m 700 mine && echo b > mine/f && echo b > b.txt", 0); res.ExitCode != 0 {
		t.Fatalf("bob writing his files: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err := sb.WriteFile(ctx, "root.txt", []byte("r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sandboxtest.CheckDenied(t, sb, "alice", 0, "echo x > mine/g", "cat mine/f", "rm -f b.txt", "echo x >> b.txt", "echo x >> root.txt")

	// A process on a terminal (exec_command's sessions) runs as the user too.
	sandboxtest.CheckProcessUser(t, sb, "bob", "id -un", true, "bob")

	// A user the manifest does not declare is refused, never run as root.
	sandboxtest.CheckUnknownUser(t, sb)
}

func TestManifestUsersIsolationNone(t *testing.T) {
	_, err := local.New(local.Options{Isolation: local.IsolationNone}).Create(context.Background(), sandbox.Spec{Address: "sandbox.u", StateDir: t.TempDir(), Accounts: testAccounts})
	if err == nil || !strings.Contains(err.Error(), "cannot switch users") {
		t.Fatalf("create with users and isolation none: %v, want a refusal", err)
	}
}
