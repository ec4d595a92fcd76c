//go:build linux

package local_test

// agentctl as an ordinary user with subordinate ids, driving a local
// sandbox with manifest users: the command runs itself in a user
// namespace of its own (internal/userns), and everything a user relies
// on works as under root: run_as, files of the manifest users owned by
// ids of their own on disk, snapshots and restores that read them,
// replacement and destroy that remove them, an interrupt passed on once.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/clitest"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/internal/userns/usernstest"
)

const subIDsConfig = `
provider "scripted" {
  script "a" {
    reply {
      call "exec_command" {
        arguments = { cmd = "id && mkdir -m 700 priv && echo secret > priv/s && chmod 600 priv/s" }
      }
    }
    reply { text = "done" }
  }
}
provider "local" {}
manifest "m" {
  %USERS%
}
sandbox "box" {
  provider = provider.local
  manifest = manifest.m
}
capability "shell" "sh" { %RUNAS% }
agent "a" {
  provider     = provider.scripted
  sandbox      = sandbox.box
  capabilities = [capability.shell.sh]
}
run "r" {
  agent = agent.a
  input = "go"
}
`

const subIDsUsers = `user "alice" { uid = 2001 }
  user "bob" {}
  group "dev" {
    gid   = 3000
    users = ["alice"]
  }`

func subIDsCLI(t *testing.T) (*clitest.CLI, usernstest.User) {
	u := usernstest.Find(t, 3000)
	requireNamespaces(t)
	// A copy of agentctl the user can run, beside its configuration.
	bin := usernstest.Executable(t, agentctlBin.Path(t))
	cfg := filepath.Join(filepath.Dir(bin), "cfg")
	if err := os.Mkdir(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	u.Chown(t, cfg)
	return &clitest.CLI{T: t, Bin: bin, Dir: cfg, File: "main.hcl", Credential: u.Credential, Env: []string{"HOME=" + u.Home}}, u
}

func writeSubIDsConfig(t *testing.T, c *clitest.CLI, u usernstest.User, users, runAs string) {
	hcl := strings.NewReplacer("%USERS%", users, "%RUNAS%", runAs).Replace(subIDsConfig)
	p := filepath.Join(c.Dir, c.File)
	if err := os.WriteFile(p, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	u.Chown(t, p)
}

// workspace is sandbox.box's workspace directory on the host.
func workspace(t *testing.T, c *clitest.CLI) string {
	st := c.MustState()
	var data struct{ Dir string }
	sb := st.Sandboxes["sandbox.box"]
	if sb == nil {
		t.Fatalf("no sandbox.box in the state")
	}
	if err := json.Unmarshal(sb.Session.Data, &data); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(data.Dir, "workspace")
}

func owner(t *testing.T, p string) int {
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

func TestManifestUsersAsOrdinaryUser(t *testing.T) {
	c, u := subIDsCLI(t)
	c.File = "main.hcl"
	writeSubIDsConfig(t, c, u, subIDsUsers, `run_as = "alice"`)
	t.Cleanup(func() { c.Run("destroy", "-auto-approve", c.File) })

	out := c.OK("apply", "-auto-approve", c.File)
	if !strings.Contains(out, "uid=2001(alice) gid=2001(alice) groups=2001(alice),3000(dev)") {
		t.Fatalf("the shell capability did not run as alice:\n%s", out)
	}
	// alice's files are owned on disk by her own subordinate id.
	ws := workspace(t, c)
	alice := u.Map.SubUID.Start + 2001 - 1
	for _, p := range []string{"priv", "priv/s"} {
		if got := owner(t, filepath.Join(ws, p)); got != alice {
			t.Errorf("%s is owned by host uid %d, want %d (alice's subordinate id)", p, got, alice)
		}
	}
	if got := strings.TrimSpace(c.Exec("sandbox.box", "stat -c %U:%G priv")); got != "alice:alice" {
		t.Errorf("owner of priv inside = %q, want alice:alice", got)
	}

	// The sandbox is lost: the next apply restores it from the snapshot,
	// which read alice's private file.
	if err := os.RemoveAll(filepath.Dir(ws)); err != nil {
		t.Fatal(err)
	}
	out = c.OK("apply", "-auto-approve", c.File)
	if !strings.Contains(out, "sandbox.box: Restor") {
		t.Fatalf("apply after the sandbox was lost did not restore it:\n%s", out)
	}
	if got := strings.TrimSpace(c.Exec("sandbox.box", "cat priv/s")); got != "secret" {
		t.Errorf("priv/s after the restore = %q, want secret", got)
	}

	// Users taken out of the manifest: the sandbox is replaced by an
	// agentctl that no longer needs a namespace, and the old one, with
	// files of ids the user does not own, is still removed.
	c.OK("exec", "-config="+c.File, "sandbox.box", "--", "true") // (starts nothing new)
	writeSubIDsConfig(t, c, u, "", "")
	sb := filepath.Dir(workspace(t, c))
	// files of alice in the sandbox again (the restore made them root's)
	if err := os.Chown(filepath.Join(sb, "workspace", "priv"), alice, alice); err != nil {
		t.Fatal(err)
	}
	out = c.OK("apply", "-auto-approve", c.File)
	if !strings.Contains(out, "sandbox.box: Replacement complete") {
		t.Fatalf("apply without the users did not replace the sandbox:\n%s", out)
	}
	if _, err := os.Lstat(sb); !os.IsNotExist(err) {
		t.Fatalf("the replaced sandbox's directory %s is still there (%v)", sb, err)
	}

	// With the users again, destroy leaves nothing.
	writeSubIDsConfig(t, c, u, subIDsUsers, `run_as = "alice"`)
	c.OK("apply", "-auto-approve", c.File)
	c.OK("destroy", "-auto-approve", c.File)
	if entries, _ := os.ReadDir(filepath.Join(c.Dir, ".agentctl", "sandboxes")); len(entries) > 0 {
		t.Fatalf("destroy left %d sandbox directories", len(entries))
	}
}

// TestInterruptAsOrdinaryUser: SIGINT to agentctl reaches the command in
// its user namespace once (a graceful stop: the tool call in flight
// finishes and is checkpointed, the run is interrupted), and no process
// of the user is left.
func TestInterruptAsOrdinaryUser(t *testing.T) {
	c, u, cmd, out := startHeldApply(t)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "agentctl to acknowledge the interrupt", func() bool { return strings.Contains(out.String(), "Interrupt received") })
	if err := os.WriteFile(filepath.Join(workspace(t, c), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() <= 0 {
		t.Fatalf("apply after SIGINT: %v, want a non-zero exit\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "Interrupt received"); n != 1 {
		t.Errorf("the interrupt was received %d times, want once:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "released") {
		t.Errorf("the tool call in flight did not finish after one interrupt:\n%s", out.String())
	}
	if st := c.MustState(); st.Runs["run.r"] == nil || st.Runs["run.r"].Status != "interrupted" {
		t.Errorf("run.r after SIGINT: %+v, want interrupted", st.Runs["run.r"])
	}
	if u.Credential != nil {
		for _, p := range processesOf(t, u.Map.UID) {
			t.Errorf("a process of %s is left after the apply: %s", u.Map.User, p)
		}
	}
	out2 := c.OK("apply", "-auto-approve", c.File)
	if !strings.Contains(out2, "run.r: Run complete") {
		t.Errorf("the next apply did not finish the run:\n%s", out2)
	}
}

// startHeldApply writes the configuration with alice's tool call held
// until a file "go" appears in the workspace (it then prints "released"),
// starts apply as the ordinary user, and returns once the tool call has
// started, with apply's combined output.
func startHeldApply(t *testing.T) (*clitest.CLI, usernstest.User, *exec.Cmd, *testfiles.SyncBuffer) {
	t.Helper()
	c, u := subIDsCLI(t)
	writeSubIDsConfig(t, c, u, subIDsUsers, `run_as = "alice"`)
	hcl, _ := os.ReadFile(filepath.Join(c.Dir, c.File))
	hcl = bytes.Replace(hcl, []byte(`cmd = "id && mkdir`), []byte(`cmd = "while [ ! -e go ]; do sleep 0.05; done; echo released; id && mkdir`), 1)
	if err := os.WriteFile(filepath.Join(c.Dir, c.File), hcl, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Run("destroy", "-auto-approve", c.File) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := c.Command(ctx, "apply", "-auto-approve", c.File)
	out := new(testfiles.SyncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tool call to start", func() bool { return strings.Contains(out.String(), "→ exec_command") })
	return c, u, cmd, out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processesOf lists the live processes of uid (zombies are left out: PID 1
// of a container may not reap the processes it inherits).
func processesOf(t *testing.T, uid int) []string {
	dirs, err := filepath.Glob("/proc/[0-9]*/status")
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		var name, state, uids string
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			switch k {
			case "Name":
				name = strings.TrimSpace(v)
			case "State":
				state = strings.TrimSpace(v)
			case "Uid":
				uids = strings.TrimSpace(v)
			}
		}
		if u := strings.Fields(uids); len(u) > 0 && u[0] == strconv.Itoa(uid) && !strings.HasPrefix(state, "Z") {
			ps = append(ps, filepath.Base(filepath.Dir(f))+" "+name+" ("+state+")")
		}
	}
	return ps
}

// TestInnerKilledAsOrdinaryUser: when the agentctl that runs in the user
// namespace is killed (it cannot say so), the outer one says it, with
// the signal's exit status, and the next apply finishes the run.
func TestInnerKilledAsOrdinaryUser(t *testing.T) {
	c, _, cmd, out := startHeldApply(t)
	// The inner agentctl is the outer one's only child (listed under the
	// thread that started it).
	lists, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var children []string
	for _, l := range lists {
		b, _ := os.ReadFile(l)
		children = append(children, strings.Fields(string(b))...)
	}
	if len(children) != 1 {
		t.Fatalf("agentctl has children %q, want one", children)
	}
	inner, _ := strconv.Atoi(children[0])
	if err := syscall.Kill(inner, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+9 {
		t.Fatalf("apply after its inner agentctl was killed: %v, want exit status 137\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "was killed by signal 9 (killed) before it finished") {
		t.Errorf("the outer agentctl did not say the inner one was killed:\n%s", out.String())
	}
	if err := os.WriteFile(filepath.Join(workspace(t, c), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := c.OK("apply", "-auto-approve", c.File); !strings.Contains(out, "Run complete") {
		t.Errorf("the next apply did not finish the run:\n%s", out)
	}
}
