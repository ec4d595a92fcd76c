package docker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// capMask is the CapEff mask of the named capabilities.
func capMask(t *testing.T, names ...string) uint64 {
	t.Helper()
	bits := map[string]uint{
		"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
		"SETUID": 7, "NET_BIND_SERVICE": 10, "NET_RAW": 13, "MKNOD": 27, "SYS_PTRACE": 19,
	}
	var m uint64
	for _, n := range names {
		b, ok := bits[n]
		if !ok {
			t.Fatalf("capMask: no bit for %s", n)
		}
		m |= 1 << b
	}
	return m
}

// statusField is the value of one line of /proc/self/status as a command
// in the sandbox sees it.
func statusField(t *testing.T, sb *Sandbox, field string) string {
	t.Helper()
	for _, line := range strings.Split(execOK(t, sb, "cat /proc/self/status"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/self/status has no %s line", field)
	return ""
}

// TestHardenedDefaults: a command in a default container runs with
// no_new_privs and only DefaultCapabilities: it cannot create device
// nodes or raw sockets, and a setuid-root program run by another user
// does not run as root.
func TestHardenedDefaults(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	if got := statusField(t, sb, "NoNewPrivs"); got != "1" {
		t.Errorf("NoNewPrivs: %s, want 1", got)
	}
	want := capMask(t, DefaultCapabilities...)
	for _, f := range []string{"CapEff", "CapBnd"} {
		got, err := strconv.ParseUint(statusField(t, sb, f), 16, 64)
		if err != nil || got != want {
			t.Errorf("%s: %x (%v), want %x", f, got, err, want)
		}
	}
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: "mknod zero c 1 5"})
	if err != nil || res.ExitCode == 0 {
		t.Errorf("mknod as root without MKNOD: exit %d, %v", res.ExitCode, err)
	}

	// A setuid-root program: its effective uid stays the caller's.
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() { fmt.Println(os.Geteuid()) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "euid")
	build := exec.Command("go", "build", "-o", bin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sb.WriteFile(ctx, "euid", data, 0o755); err != nil {
		t.Fatal(err)
	}
	out := execOK(t, sb, "chown 0:0 euid && chmod 4755 euid && ls -l euid | cut -c1-10 && ./euid && su -s /bin/sh user -c ./euid")
	if out != "-rwsr-xr-x\n0\n1000\n" {
		t.Errorf("setuid-root program run by root, then by user 1000: %q, want euid 0 then 1000", out)
	}
}

// TestCapAdd: cap_add adds capabilities back, and an unknown name is
// refused.
func TestCapAdd(t *testing.T) {
	spec := testSpec(t)
	spec.Settings = &SandboxSettings{CapAdd: []string{"net_raw", "CAP_SYS_PTRACE"}}
	sb := newSandbox(t, spec)
	want := capMask(t, append(DefaultCapabilities, "NET_RAW", "SYS_PTRACE")...)
	if got, err := strconv.ParseUint(statusField(t, sb, "CapEff"), 16, 64); err != nil || got != want {
		t.Errorf("CapEff with cap_add: %x (%v), want %x", got, err, want)
	}
	_, err := decodeSettings(t, `cap_add = ["SYS_EVERYTHING"]`, registry.SandboxArgs{Image: "alpine"})
	if err == nil || !strings.Contains(err.Error(), `"SYS_EVERYTHING" is not a Linux capability`) {
		t.Errorf("unknown capability: %v", err)
	}
}

// TestDefaultPIDsLimit: without a pids setting, a command cannot have
// more than DefaultPIDs processes alive.
func TestDefaultPIDsLimit(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	// The subshell forks until the limit makes it fail (a failed fork
	// ends an ash subshell); the parent then reports how many started and
	// kills them with builtins only, since no fork is possible until then.
	script := `(n=0; while [ $n -lt ` + strconv.Itoa(DefaultPIDs+50) + ` ]; do sleep 600 & echo $! >> pids; n=$((n+1)); echo $n > count; done) 2>/dev/null
read n < count; echo started $n
while read p; do kill $p; done < pids`
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: script, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscanf(string(res.Stdout), "started %d", &n); err != nil {
		t.Fatalf("output %q stderr %q: %v", res.Stdout, res.Stderr, err)
	}
	// A handful of pids are taken by init, the idle loop and the shells.
	if n >= DefaultPIDs || n < DefaultPIDs-16 {
		t.Errorf("started %d background processes, want just under the default limit %d", n, DefaultPIDs)
	}
	t.Logf("started %d", n)
}

// TestShmBounded: /dev/shm holds DefaultShmSizeMB by default, shm_size
// changes it, and writing past it fails.
func TestShmBounded(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	if out := execOK(t, sb, "df -k /dev/shm | awk 'NR==2 {print $2}'"); out != strconv.Itoa(DefaultShmSizeMB*1024)+"\n" {
		t.Errorf("/dev/shm size: %q KiB, want %d", out, DefaultShmSizeMB*1024)
	}
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: "dd if=/dev/zero of=/dev/shm/big bs=1M count=" + strconv.Itoa(DefaultShmSizeMB+16)})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Errorf("writing %d MiB to /dev/shm: exit %d, stderr %q", DefaultShmSizeMB+16, res.ExitCode, res.Stderr)
	}
	spec := testSpec(t)
	shm := int64(8)
	spec.Settings = &SandboxSettings{ShmSizeMB: &shm}
	small := newSandbox(t, spec)
	if out := execOK(t, small, "df -k /dev/shm | awk 'NR==2 {print $2}'"); out != "8192\n" {
		t.Errorf("/dev/shm size with shm_size = 8: %q KiB", out)
	}
}
