package local_test

import (
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

// The manifest's users are named in the sandbox, the default user is
// root, and a user's files are its own on the host too (sandboxtest
// checks ids, refusals and processes; and the refusal where this process
// cannot map the ids).
func TestManifestUsers(t *testing.T) {
	if _, lacks := sandbox.Lacks(local.New(local.Options{}), sandbox.CapabilityUsers); lacks {
		t.Skip("manifest users are refused here: TestSandboxContract checks the refusal")
	}
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{Accounts: testAccounts})
	res := sandboxtest.ExecAs(t, sb, "alice", "id; echo $USER $HOME", 0)
	want := "uid=2001(alice) gid=2001(alice) groups=2001(alice),3000(dev)\nalice /workspace\n"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Fatalf("id as alice = %q (exit %d, %s), want %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
	if res := sh(t, sb, "id -u"); strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("default user id = %q, want 0", res.Stdout)
	}
	sandboxtest.ExecAs(t, sb, "alice", "echo hi > a.txt", 0)
	fi, err := os.Stat(filepath.Join(sb.Dir(), "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 2001 {
		t.Errorf("a.txt is owned by host uid %d, want 2001", uid)
	}
}
