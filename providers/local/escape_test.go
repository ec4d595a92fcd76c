package local_test

// The escape suite: every attempt is made by a command inside a sandbox
// with the default isolation, and none may succeed. Host-side checks make
// each attempt meaningful (the target exists and would be reachable
// without the sandbox).

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

func escapeSandbox(t *testing.T, spec sandbox.Spec) (*local.Sandbox, string) {
	t.Helper()
	requireNamespaces(t)
	return newSandbox(t, local.Options{}, spec)
}

// mustFail runs script and fails the test when it exits 0 or prints want.
func mustFail(t *testing.T, sb sandbox.Sandbox, script, leak string) sandbox.ExecResult {
	t.Helper()
	res := sh(t, sb, script)
	if res.ExitCode == 0 {
		t.Errorf("escape attempt succeeded: %q\nstdout: %s\nstderr: %s", script, res.Stdout, res.Stderr)
	}
	if leak != "" && (bytes.Contains(res.Stdout, []byte(leak)) || bytes.Contains(res.Stderr, []byte(leak))) {
		t.Errorf("escape attempt %q leaked %q:\n%s%s", script, leak, res.Stdout, res.Stderr)
	}
	return res
}

func TestEscapeReadShadow(t *testing.T) {
	sb, _ := escapeSandbox(t, sandbox.Spec{})
	if _, err := os.Stat("/etc/shadow"); err != nil {
		testenv.Missing(t, "no /etc/shadow on this host: %v", err)
	}
	// When the test can read it, no line of it may show up.
	host, _ := os.ReadFile("/etc/shadow")
	line, _, _ := strings.Cut(string(host), "\n")
	for _, script := range []string{
		"cat /etc/shadow",
		"cat /proc/1/root/etc/shadow",
		"cat /proc/self/root/etc/shadow",
		"cat /workspace/../etc/shadow",
		"ls -la /etc/shadow",
	} {
		mustFail(t, sb, script, line)
	}
}

func TestEscapeReadBesideConfiguration(t *testing.T) {
	sb, stateDir := escapeSandbox(t, sandbox.Spec{})
	// A configuration directory with a world-readable secret: file
	// permissions would not stop a reader, only invisibility does.
	configDir := t.TempDir()
	os.Chmod(configDir, 0o755)
	secret := filepath.Join(configDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET-CONFIG"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another sandbox's workspace in the same state directory.
	other, _ := newSandbox(t, local.Options{}, sandbox.Spec{Address: "sandbox.other", StateDir: stateDir})
	if err := other.WriteFile(context.Background(), "private.txt", []byte("OTHER-WORKSPACE"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{
		"cat " + secret,
		"ls " + configDir,
		"cat " + filepath.Join(other.Dir(), "private.txt"),
		"cat /workspace/../agentctl-sandbox.json",
		"ls " + stateDir,
		"ls /root /home",
		"cat /proc/1/root" + secret,
	} {
		res := mustFail(t, sb, script, "TOP-SECRET-CONFIG")
		if bytes.Contains(res.Stdout, []byte("OTHER-WORKSPACE")) {
			t.Errorf("%q read another workspace", script)
		}
	}
	// The test binary itself, run inside as a reader, cannot either.
	probe := installProbe(t, sb)
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{probe}, Env: map[string]string{helperEnv: "read " + secret}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Errorf("probe read %s: %s", secret, res.Stdout)
	}
}

func TestEscapeWriteOutsideWorkspace(t *testing.T) {
	sb, stateDir := escapeSandbox(t, sandbox.Spec{})
	hostTmp := t.TempDir()
	os.Chmod(hostTmp, 0o777) // writable by anyone: only invisibility protects it
	targets := []string{
		filepath.Join(hostTmp, "pwned"),
		filepath.Join(stateDir, "pwned"),
		filepath.Join(filepath.Dir(sb.Dir()), "pwned"), // beside the workspace
		"/pwned-agentctl-test",
		"/usr/pwned-agentctl-test",
		"/etc/pwned-agentctl-test",
		"/workspace/../pwned-agentctl-test",
	}
	for _, p := range targets {
		mustFail(t, sb, "echo pwned > "+p, "")
	}
	mustFail(t, sb, "touch /usr/bin/pwned-agentctl-test", "")
	mustFail(t, sb, "mount -t tmpfs none /workspace", "")
	mustFail(t, sb, "umount /usr", "")
	for _, p := range append(targets, "/usr/bin/pwned-agentctl-test") {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("host file %s appeared", p)
		}
	}
	ents, _ := os.ReadDir(hostTmp)
	if len(ents) != 0 {
		t.Errorf("host temp dir written: %v", ents)
	}
}

func TestEscapeNetwork(t *testing.T) {
	sb, _ := escapeSandbox(t, sandbox.Spec{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	probe := installProbe(t, sb)
	dial := func(sb sandbox.Sandbox) sandbox.ExecResult {
		res, err := sb.Exec(context.Background(), sandbox.ExecRequest{
			Argv: []string{probe}, Env: map[string]string{helperEnv: "dial " + ln.Addr().String()},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := dial(sb); res.ExitCode == 0 || accepted.Load() != 0 {
		t.Fatalf("connected to the host's 127.0.0.1 from the sandbox: %s", res.Stdout)
	}
	// The same probe with network = "host" connects: the probe works.
	hostNet, _ := newSandbox(t, local.Options{}, sandbox.Spec{Address: "sandbox.hostnet", Network: "host"})
	installProbe(t, hostNet)
	if res := dial(hostNet); res.ExitCode != 0 {
		t.Fatalf("control probe with network = host failed: %s%s", res.Stdout, res.Stderr)
	}
}

func TestEscapeSignalHostProcess(t *testing.T) {
	sb, _ := escapeSandbox(t, sandbox.Spec{})
	victim := exec.Command("sleep", "1000")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { victim.Wait(); close(exited) }()
	defer func() { victim.Process.Kill(); <-exited }()
	pid := victim.Process.Pid
	mustFail(t, sb, fmt.Sprintf("kill -9 %d", pid), "")
	mustFail(t, sb, fmt.Sprintf("kill -STOP %d", pid), "")
	mustFail(t, sb, fmt.Sprintf("test -e /proc/%d", pid), "")
	sh(t, sb, "kill -9 -1; true") // everything it can see
	select {
	case <-exited:
		t.Fatal("the host process was killed from the sandbox")
	case <-time.After(100 * time.Millisecond):
	}
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if f := strings.Fields(string(st)); len(f) > 2 && f[2] == "T" {
		t.Fatal("the host process was stopped from the sandbox")
	}
}

func TestEscapeSymlinksWithFileTools(t *testing.T) {
	sb, _ := escapeSandbox(t, sandbox.Spec{})
	ctx := context.Background()
	// A decoy host file stands in for /etc/passwd as a write target, so a
	// failure of this test cannot damage the machine.
	decoyDir := t.TempDir()
	decoy := filepath.Join(decoyDir, "decoy")
	os.WriteFile(decoy, []byte("original"), 0o666)
	res := sh(t, sb, "ln -s /etc/passwd passwd && ln -s "+decoy+" decoy && ln -s "+decoyDir+" decoydir && ln -s .. up && ln -s ../agentctl-sandbox.json marker && mkdir d && ln -s ../../ d/upup && echo ok")
	if string(res.Stdout) != "ok\n" {
		t.Fatalf("creating links: %+v", res)
	}
	escape := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("%s = %v, want ErrPathEscape", what, err)
		}
	}
	for _, p := range []string{"passwd", "decoy", "marker", "up/agentctl-sandbox.json", "d/upup/agentctl-sandbox.json", "decoydir/decoy"} {
		b, err := sb.ReadFile(ctx, p, 0)
		escape("ReadFile "+p, err)
		if len(b) > 0 {
			t.Errorf("ReadFile %s returned %q", p, b)
		}
	}
	escape("WriteFile through a file link", sb.WriteFile(ctx, "decoy", []byte("pwned"), 0o644))
	escape("WriteFile through a dir link", sb.WriteFile(ctx, "decoydir/decoy", []byte("pwned"), 0o644))
	escape("WriteFile new file beside", sb.WriteFile(ctx, "up/new.txt", []byte("pwned"), 0o644))
	escape("Mkdir through a link", sb.Mkdir(ctx, "decoydir/sub"))
	escape("Remove through a link", sb.Remove(ctx, "decoydir/decoy"))
	_, err := sb.ReadDir(ctx, "up")
	escape("ReadDir ..", err)
	_, err = sb.Stat(ctx, "up/agentctl-sandbox.json")
	escape("Stat through a link", err)
	_, err = sb.CopyOut(ctx, "decoydir")
	escape("CopyOut through a link", err)
	escape("CopyIn through a link", sb.CopyIn(ctx, "decoydir", tarOf(t, map[string]string{"decoy": "pwned"})))
	if b, _ := os.ReadFile(decoy); string(b) != "original" {
		t.Fatalf("decoy changed to %q", b)
	}
	if ents, _ := os.ReadDir(decoyDir); len(ents) != 1 {
		t.Fatalf("decoy directory changed: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(sb.Dir()), "new.txt")); err == nil {
		t.Fatal("file written beside the workspace")
	}
	// Stat of the link itself is fine and shows the target.
	fi, err := sb.Stat(ctx, "passwd")
	if err != nil || fi.Target != "/etc/passwd" {
		t.Fatalf("Stat link = %+v, %v", fi, err)
	}
}

func TestEscapeForkBomb(t *testing.T) {
	// A lower process limit than the default keeps the bomb gentle on a
	// shared test machine; TestSandboxIdentity checks the default.
	sb, _ := escapeSandbox(t, sandbox.Spec{Resources: sandbox.Resources{PIDs: 128}})
	marker := "agentctl-forkbomb-" + filepath.Base(sb.ID())
	// The bomb runs as a copy of sh with a recognizable name.
	if res := sh(t, sb, "cp /bin/sh ./"+marker); res.ExitCode != 0 {
		t.Fatalf("copy sh: %+v", res)
	}
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{
		Argv:    []string{"./" + marker, "-c", "f() { f | f & }; sleep 1000 & (f) & wait"},
		Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork bomb: exit %d, timed out %v, wall %v, %d bytes of errors", res.ExitCode, res.TimedOut, res.Wall, res.OriginalStderr)
	if !res.TimedOut {
		t.Errorf("the bomb was expected to run into its timeout")
	}
	start := time.Now()
	waitNoProcess(t, marker)
	t.Logf("all processes gone %v after the exec returned", time.Since(start))
	// The machine, and the sandbox, recover.
	if res := sh(t, sb, "echo alive"); string(res.Stdout) != "alive\n" {
		t.Fatalf("sandbox unusable after the bomb: %+v", res)
	}
}

func TestPIDLimit(t *testing.T) {
	sb, _ := escapeSandbox(t, sandbox.Spec{Resources: sandbox.Resources{PIDs: 20}})
	res := sh(t, sb, "i=0; while [ $i -lt 40 ]; do sleep 5 & i=$((i+1)); done 2>&1; echo done")
	if !bytes.Contains(bytes.ToLower(res.Stdout), []byte("fork")) {
		t.Fatalf("40 processes started under a limit of 20: %s", res.Stdout)
	}
}

func TestSandboxIdentity(t *testing.T) {
	sb, _ := escapeSandbox(t, sandbox.Spec{})
	res := sh(t, sb, "id -u; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; grep NoNewPrivs /proc/self/status; cat /proc/self/uid_map; hostname; grep 'Max processes' /proc/self/limits")
	out := string(res.Stdout)
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "sandbox", fmt.Sprintf(" %d ", local.DefaultPIDs)} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if os.Geteuid() == 0 && !strings.Contains(out, fmt.Sprint(local.DefaultHostID)) {
		t.Errorf("as root, the sandbox must map to the unprivileged host id %d:\n%s", local.DefaultHostID, out)
	}
}

// installProbe copies the test binary into the workspace.
func installProbe(t *testing.T, sb sandbox.Sandbox) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(context.Background(), "probe", b, 0o755); err != nil {
		t.Fatal(err)
	}
	return "/workspace/probe"
}

var _ = syscall.SIGKILL

func TestSetuidFilesAreInert(t *testing.T) {
	sb, _ := escapeSandbox(t, sandbox.Spec{})
	res := sh(t, sb, "cp /bin/sh ./suidsh && chmod 4755 ./suidsh && ./suidsh -c 'grep CapEff /proc/self/status'")
	if !bytes.Contains(res.Stdout, []byte("CapEff:\t0000000000000000")) {
		t.Fatalf("setuid binary gained capabilities: %+v", res)
	}
	rc, err := sb.CopyOut(context.Background(), ".")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Mode&^0o777 != 0 {
			t.Errorf("CopyOut kept mode %o for %s", h.Mode, h.Name)
		}
	}
}

// TestAgentctlDeathKillsSandbox kills the process that runs a sandboxed
// command (as a crash of agentctl would) and checks the command dies too.
func TestAgentctlDeathKillsSandbox(t *testing.T) {
	requireNamespaces(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("agentctl-orphan-%d", os.Getpid())
	helper := exec.Command(exe)
	helper.Env = append(os.Environ(), helperEnv+"=spawn "+t.TempDir()+" "+marker)
	var out bytes.Buffer
	helper.Stdout, helper.Stderr = &out, &out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(findProcesses(marker)) == 0 {
		if time.Now().After(deadline) {
			helper.Process.Kill()
			helper.Wait()
			t.Fatalf("the sandboxed command never started: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	helper.Process.Signal(syscall.SIGKILL)
	helper.Wait()
	waitNoProcess(t, marker)
}

// TestNamespacesUnavailable runs sandbox creation where user namespaces
// cannot be created (a user namespace whose max_user_namespaces is 0)
// and checks the error explains it and names the opt-out.
func TestNamespacesUnavailable(t *testing.T) {
	requireNamespaces(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.Missing(t, "needs util-linux unshare: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, "-Ur", "sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0"`, exe)
	cmd.Env = append(os.Environ(), helperEnv+"=create "+t.TempDir())
	out, _ := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("Permission denied")) || bytes.Contains(out, []byte("Operation not permitted")) && !bytes.Contains(out, []byte("local provider")) {
		testenv.Missing(t, "cannot restrict user namespaces here: %s", out)
	}
	for _, want := range []string{"cannot start a command in isolated namespaces", "does not allow creating user namespaces", `isolation = "none"`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
