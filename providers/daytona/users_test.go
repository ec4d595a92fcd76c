package daytona

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

var testAccounts = sandboxtest.Accounts()

// The fake models Daytona's sudo (internal/fakedaytona/accounts.go): the
// accounts land in the sandbox's own passwd and group files, and both
// ways of running a command (process/execute and sessions) run it as the
// user, which needs root here. sandboxtest checks the rest.
func TestManifestUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the Daytona fake runs a user's commands with setpriv, which switches ids only as root")
	}
	e := newEnv(t)
	e.spec.Accounts = testAccounts
	w := e.create(t)
	ctx := context.Background()

	passwd, group := e.fake.Accounts(w.ID())
	root := e.spec.Root
	if want := "alice:x:2001:2001::" + root + ":/bin/sh\nbob:x:2002:2002::" + root + ":/bin/sh\n"; passwd != want {
		t.Errorf("passwd = %q, want %q", passwd, want)
	}
	if want := "alice:x:2001:\nbob:x:2002:\ndev:x:3000:alice\n"; group != want {
		t.Errorf("group = %q, want %q", group, want)
	}
	// Short (process/execute) and long (session) commands.
	for _, timeout := range []time.Duration{10 * time.Second, 0} {
		res, err := w.Exec(ctx, sandbox.ExecRequest{Shell: "id -u; id -g; id -G; pwd", User: "alice", Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		if want := "2001\n2001\n2001 3000\n" + root + "\n"; string(res.Stdout) != want {
			t.Errorf("timeout %v: id as alice = %q (exit %d, %s), want %q", timeout, res.Stdout, res.ExitCode, res.Stderr, want)
		}
	}
}
