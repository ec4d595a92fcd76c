// Package clitest runs the agentctl binary from tests that drive a real
// peer end to end through the command line (the Docker and Kubernetes
// providers' pipeline tests): Binary builds cmd/agentctl once per test
// binary, CLI runs it in one configuration directory and reads the state
// it wrote. Used by tests only.
package clitest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

// Binary is cmd/agentctl built once, in a temporary directory that
// Remove deletes (from TestMain).
type Binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the binary on first use and returns its path.
func (b *Binary) Path(tb testing.TB) string {
	tb.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "agentctl-clitest-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "agentctl")
		cmd := exec.Command("go", "build", "-o", b.path, "github.com/agentctl/agentctl/cmd/agentctl")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/agentctl: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// Remove deletes the binary's directory, if it was built.
func (b *Binary) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// CLI runs agentctl in one configuration directory.
type CLI struct {
	T    *testing.T
	Bin  string
	Dir  string
	File string // the configuration file, relative to Dir
	Env  []string
	// Timeout bounds each Run (default 3 minutes).
	Timeout time.Duration
	// Credential, when set, runs agentctl as another user (the test runs
	// as root).
	Credential *syscall.Credential
}

// Command is agentctl ARGS in Dir, without colour, with Env added to the
// test's environment.
func (c *CLI) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Bin, append([]string{"-no-color"}, args...)...)
	cmd.Dir = c.Dir
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), c.Env...)
	cmd.WaitDelay = 5 * time.Second
	if c.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.Credential}
	}
	return cmd
}

// Run runs agentctl and returns its combined output and exit code.
func (c *CLI) Run(args ...string) (string, int) {
	c.T.Helper()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := c.Command(ctx, args...).CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		c.T.Fatalf("agentctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), 0
}

// OK runs agentctl and fails the test unless it exits 0.
func (c *CLI) OK(args ...string) string {
	c.T.Helper()
	out, code := c.Run(args...)
	if code != 0 {
		c.T.Fatalf("agentctl %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// Exec runs a shell command in a managed sandbox with agentctl exec.
func (c *CLI) Exec(addr, shell string) string {
	c.T.Helper()
	return c.OK("exec", "-config="+c.File, addr, "--", "sh", "-c", shell)
}

// StateDir is where the configuration file's state is kept.
func (c *CLI) StateDir() string {
	return filepath.Join(c.Dir, ".agentctl", strings.TrimSuffix(c.File, filepath.Ext(c.File)))
}

// State reads the state (the state file and its log); nil while there is
// none.
func (c *CLI) State() *state.State {
	d, err := local.OpenDir(c.StateDir())
	if err != nil || !d.Exists() {
		return nil
	}
	st, err := d.Read(context.Background())
	if err != nil {
		return nil
	}
	return st
}

// MustState is State, failing the test when there is none.
func (c *CLI) MustState() *state.State {
	c.T.Helper()
	st := c.State()
	if st == nil {
		c.T.Fatalf("no readable state under %s", c.StateDir())
	}
	return st
}
