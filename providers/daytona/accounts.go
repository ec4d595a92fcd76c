package daytona

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// Daytona's toolbox runs every command as the sandbox's user (daytona in
// the default snapshots, which gives it passwordless sudo) and has no way
// to name another: commands run as a manifest user, and the accounts are
// created as root, through sudo -n, which never prompts.

// sudoMissing is the exit code of accountsWrapper when the image has no
// sudo.
const sudoMissing = 5

// accountsWrapper runs sandbox.AccountsScript ($0) with its arguments as
// root through sudo, after checking sudo is there: it is also what runs
// commands as the manifest's users.
const accountsWrapper = `command -v sudo >/dev/null 2>&1 || { echo "sudo is not installed" >&2; exit 5; }
exec sudo -n /bin/sh -c "$0" sh "$@"`

// accountsTimeout bounds creating the accounts.
const accountsTimeout = 2 * time.Minute

// createAccounts creates the manifest's users and groups in a new sandbox.
func (w *Workspace) createAccounts(ctx context.Context) error {
	a := w.spec.Accounts
	if a.Empty() {
		return nil
	}
	argv := append([]string{"/bin/sh", "-c", accountsWrapper, sandbox.AccountsScript}, sandbox.AccountsArgs(a, w.root)...)
	res, err := w.Exec(ctx, sandbox.ExecRequest{Argv: argv, Timeout: accountsTimeout})
	if err != nil {
		return fmt.Errorf("creating the manifest's users and groups: %w", err)
	}
	image := w.spec.Image
	if image == "" {
		image = "the sandbox's snapshot"
	}
	switch res.ExitCode {
	case 0:
		return nil
	case sudoMissing:
		return fmt.Errorf("creating the manifest's users and groups: %s has no sudo, which agentctl needs to create them and to run commands as them (Daytona's toolbox runs every command as the sandbox's user); use an image with sudo and passwordless sudo for that user, as Daytona's default snapshots have", image)
	}
	stderr := string(res.Stderr)
	if strings.Contains(stderr, "a password is required") || strings.Contains(stderr, "may not run sudo") {
		return fmt.Errorf("creating the manifest's users and groups: the sandbox's user may not use sudo without a password in %s: %s", image, strings.TrimSpace(stderr))
	}
	return sandbox.AccountsError(image, res.ExitCode, stderr)
}

// asUser is the sudo prefix that runs a command as req's user, "" for
// the sandbox's own user; an undeclared user is an error.
func (w *Workspace) asUser(user string) (string, error) {
	if user == "" {
		return "", nil
	}
	if _, ok := w.spec.Accounts.User(user); !ok {
		return "", fmt.Errorf("exec: %w", &sandbox.UnknownUserError{Name: user})
	}
	return "sudo -n -u " + sandbox.ShellQuote(user) + " -- ", nil
}
