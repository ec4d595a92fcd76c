package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

var isolations = []string{local.IsolationNamespaces, local.IsolationNone}

// requireNamespaces skips when this machine cannot create user namespaces.
func requireNamespaces(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	sb, err := local.New(local.Options{}).Create(context.Background(), sandbox.Spec{Address: "sandbox.probe", StateDir: dir})
	if err != nil {
		if strings.Contains(err.Error(), "cannot start a command in isolated namespaces") {
			testenv.Missing(t, "user namespaces are unavailable here: %v", err)
		}
		t.Fatal(err)
	}
	sb.Delete(context.Background())
}

func forEachIsolation(t *testing.T, f func(t *testing.T, iso string)) {
	for _, iso := range isolations {
		t.Run(iso, func(t *testing.T) {
			if iso == local.IsolationNamespaces {
				requireNamespaces(t)
			}
			f(t, iso)
		})
	}
}

func TestExecBasics(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		t.Setenv("AGENTCTL_TEST_HOST_ONLY", "leaked")
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		ctx := context.Background()

		res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"echo", "hello", "world"}})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hello world\n" {
			t.Fatalf("argv exec = %+v, %v", res, err)
		}

		res = sh(t, sb, "echo out; echo err >&2; exit 7")
		if res.ExitCode != 7 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.TimedOut || res.Truncated {
			t.Fatalf("shell exec = %+v", res)
		}
		if res.Wall <= 0 {
			t.Errorf("wall time not measured: %v", res.Wall)
		}

		res, err = sb.Exec(ctx, sandbox.ExecRequest{Shell: "tr a-z A-Z", Stdin: strings.NewReader("from stdin")})
		if err != nil || string(res.Stdout) != "FROM STDIN" {
			t.Fatalf("stdin exec = %+v, %v", res, err)
		}

		res, err = sb.Exec(ctx, sandbox.ExecRequest{
			Shell: `echo "$GREETING|$AGENTCTL_TEST_HOST_ONLY|$HOME|$PATH"`,
			Env:   map[string]string{"GREETING": "hi there"},
		})
		if err != nil {
			t.Fatal(err)
		}
		home := "/workspace"
		if iso == local.IsolationNone {
			home = sb.Dir()
		}
		if want := "hi there||" + home + "|" + local.DefaultPath + "\n"; string(res.Stdout) != want {
			t.Fatalf("environment = %q, want %q", res.Stdout, want)
		}

		res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"no-such-program-xyz"}})
		if err != nil || res.ExitCode != 127 {
			t.Fatalf("missing program = %+v, %v", res, err)
		}
	})
}

func TestExecWorkdir(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		ctx := context.Background()
		if err := sb.Mkdir(ctx, "sub/dir"); err != nil {
			t.Fatal(err)
		}
		if err := sb.WriteFile(ctx, "sub/dir/data.txt", []byte("payload\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "cat data.txt; basename \"$PWD\"", Workdir: "sub/dir"})
		if err != nil || string(res.Stdout) != "payload\ndir\n" {
			t.Fatalf("workdir exec = %+v, %v", res, err)
		}
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true", Workdir: "../"}); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Fatalf("workdir ../ = %v, want ErrPathEscape", err)
		}
		if err := os.Symlink("/etc", filepath.Join(sb.Dir(), "etc-link")); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true", Workdir: "etc-link"}); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Fatalf("workdir through symlink out = %v, want ErrPathEscape", err)
		}
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true", Workdir: "missing"}); err == nil {
			t.Fatal("missing workdir accepted")
		}
	})
}

func TestExecTimeoutKillsTree(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		marker := "agentctl-timeout-test-" + filepath.Base(sb.ID())
		// Background children, one ignoring SIGTERM, that a kill of the
		// shell alone would leave behind; named through a copy of sleep.
		sh(t, sb, "cp /bin/sleep ./"+marker)
		script := "echo started; (./" + marker + " 1000 &) && (trap '' TERM; ./" + marker + " 1000) & ./" + marker + " 1000 & wait"
		res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: script, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode != local.TimeoutExitCode {
			t.Fatalf("result = %+v, want a timeout", res)
		}
		if !bytes.Contains(res.Stdout, []byte("started")) {
			t.Errorf("output before the timeout was lost: %q", res.Stdout)
		}
		waitNoProcess(t, marker)
	})
}

// waitNoProcess fails when a process whose command line contains name is
// still alive after a short grace period.
func waitNoProcess(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := findProcesses(name)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v (%s) survived", pids, name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func findProcesses(name string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(name)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestExecOutputLimit(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		res, err := sb.Exec(context.Background(), sandbox.ExecRequest{
			Shell:       "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done",
			OutputLimit: 100,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || res.OriginalStdout < 10000 {
			t.Fatalf("truncated=%v original=%d", res.Truncated, res.OriginalStdout)
		}
		if !bytes.HasPrefix(res.Stdout, []byte("line0\nline1\n")) || !bytes.HasSuffix(res.Stdout, []byte("line1999\n")) {
			t.Fatalf("head/tail not kept: %q", res.Stdout)
		}
		if !bytes.Contains(res.Stdout, []byte("truncated")) {
			t.Fatalf("no truncation marker: %q", res.Stdout)
		}
	})
}

func TestFilesSharedWithCommands(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		ctx := context.Background()
		// Written by the host side, changed by the command, read back.
		if err := sb.WriteFile(ctx, "notes/a.txt", []byte("one\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res := sh(t, sb, "echo two >> notes/a.txt && mkdir -p out/deep && echo made > out/deep/b.txt && rm notes/a.txt.missing 2>/dev/null; echo ok")
		if string(res.Stdout) != "ok\n" || len(res.Stderr) != 0 {
			t.Fatalf("command on host-written files: %+v", res)
		}
		b, err := sb.ReadFile(ctx, "notes/a.txt", 0)
		if err != nil || string(b) != "one\ntwo\n" {
			t.Fatalf("read back = %q, %v", b, err)
		}
		// Created by the command, replaced and removed by the host side.
		if err := sb.WriteFile(ctx, "out/deep/b.txt", []byte("replaced"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := sb.Remove(ctx, "out/deep/b.txt"); err != nil {
			t.Fatal(err)
		}
		// The private /tmp lasts across the commands of one sandbox.
		sh(t, sb, "echo kept > /tmp/agentctl-local-test")
		res = sh(t, sb, "cat /tmp/agentctl-local-test")
		if string(res.Stdout) != "kept\n" {
			t.Fatalf("/tmp across execs: %+v", res)
		}
		if iso == local.IsolationNamespaces {
			if _, err := os.Stat("/tmp/agentctl-local-test"); err == nil {
				os.Remove("/tmp/agentctl-local-test")
				t.Fatal("the sandbox's /tmp is the host's /tmp")
			}
		} else {
			os.Remove("/tmp/agentctl-local-test")
		}
	})
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	stateDir := t.TempDir()
	p := local.New(local.Options{Isolation: local.IsolationNone})
	spec := sandbox.Spec{Address: `sandbox.review["pricing"]`, StateDir: stateDir, Root: "/workspace"}
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "keep.txt", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := sb.Refresh(ctx); err != nil || st != sandbox.StatusRunning {
		t.Fatalf("refresh = %v, %v", st, err)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("exec on a stopped sandbox = %v", err)
	}
	// Reconnect from the stored session state.
	re, err := p.Open(ctx, spec, sb.Session())
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := re.Refresh(ctx); st != sandbox.StatusStopped {
		t.Fatalf("reopened status = %v", st)
	}
	if err := re.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := re.ReadFile(ctx, "keep.txt", 0); err != nil || string(b) != "x" {
		t.Fatalf("reopened read = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Dir(re.ID())); err != nil || fi.Mode().Perm()&0o077 != 0 && filepath.Dir(re.ID()) != stateDir {
		t.Fatalf("state dir permissions: %v %v", fi, err)
	}
	if fi, _ := os.Stat(re.ID()); fi.Mode().Perm() != 0o700 {
		t.Errorf("sandbox directory mode = %v, want 0700", fi.Mode().Perm())
	}
	if _, err := re.PortURL(ctx, 8080); err != nil {
		t.Errorf("port url: %v", err)
	}
	// Gone: refresh says missing, open says not found, delete is a no-op.
	if err := re.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := sb.Refresh(ctx); err != nil || st != sandbox.StatusMissing {
		t.Fatalf("refresh after delete = %v, %v", st, err)
	}
	if _, err := p.Open(ctx, spec, sb.Session()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("open after delete = %v, want ErrNotFound", err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatalf("second delete = %v", err)
	}
}

func TestDeleteRefusesForeignDirectory(t *testing.T) {
	ctx := context.Background()
	victim := t.TempDir()
	os.WriteFile(filepath.Join(victim, "precious"), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(victim, "workspace"), 0o755)
	p := local.New(local.Options{Isolation: local.IsolationNone})
	st := sandbox.SessionState{Provider: "local", ID: victim, Data: []byte(`{"dir":"` + victim + `"}`)}
	if _, err := p.Open(ctx, sandbox.Spec{Address: "sandbox.x", StateDir: t.TempDir()}, st); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("open of a foreign directory = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(victim, "precious")); err != nil {
		t.Fatal("foreign directory touched")
	}
}

func TestSpecChecks(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opts local.Options
		spec sandbox.Spec
		want string
	}{
		{local.Options{Isolation: "chroot"}, sandbox.Spec{}, `unknown isolation "chroot"`},
		{local.Options{}, sandbox.Spec{Root: "/usr/work"}, "system directory"},
		{local.Options{}, sandbox.Spec{Root: "relative"}, "clean absolute path"},
		{local.Options{}, sandbox.Spec{Network: "bridge"}, `network "bridge" is not supported`},
	} {
		tc.spec.StateDir = t.TempDir()
		if _, err := local.New(tc.opts).Create(ctx, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Create(%+v, %+v) = %v, want %q", tc.opts, tc.spec, err, tc.want)
		}
	}
}

func TestNamespaceErrorNamesOptOut(t *testing.T) {
	// A binary that cannot be executed stands in for a machine where the
	// namespaced init cannot start: the error must say how to opt out.
	bad := filepath.Join(t.TempDir(), "not-agentctl")
	os.WriteFile(bad, []byte("not a program"), 0o644)
	_, err := local.New(local.Options{Executable: bad}).Create(context.Background(), sandbox.Spec{Address: "sandbox.x", StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `isolation = "none"`) {
		t.Fatalf("error = %v, want one naming the opt-out", err)
	}
}

func TestPortURLNeedsHostNetwork(t *testing.T) {
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{})
	if _, err := sb.PortURL(context.Background(), 8080); err == nil || !strings.Contains(err.Error(), `network = "host"`) {
		t.Fatalf("port url without network = %v", err)
	}
	sb2, _ := newSandbox(t, local.Options{}, sandbox.Spec{Network: "host"})
	u, err := sb2.PortURL(context.Background(), 8080)
	if err != nil || u != "http://127.0.0.1:8080" {
		t.Fatalf("port url = %q, %v", u, err)
	}
}

func TestExecCancel(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("exec with a cancelled context = %v", err)
		}
		marker := "agentctl-cancel-test-" + filepath.Base(sb.ID())
		sh(t, sb, "cp /bin/sleep ./"+marker)
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "./" + marker + " 1000 & ./" + marker + " 1000"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled exec = %v", err)
		}
		waitNoProcess(t, marker)
	})
}

func TestSandboxConventionalPaths(t *testing.T) {
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{})
	res := sh(t, sb, "echo v > /var/tmp/x && cat /tmp/x && test -r /etc/mtab && test -e /dev/null && echo ok")
	if string(res.Stdout) != "v\nok\n" {
		t.Fatalf("%+v", res)
	}
}

// The small files of the host's /etc that the sandbox's root carries are
// copies of them, byte for byte (the init copies them in the kernel).
func TestSandboxEtcCopies(t *testing.T) {
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{})
	checked := 0
	for _, name := range []string{"services", "protocols", "mime.types", "ld.so.cache", "gai.conf", "debian_version", "inputrc"} {
		fi, err := os.Lstat("/etc/" + name)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o004 == 0 || fi.Size() > 256<<10 {
			continue
		}
		want, err := os.ReadFile("/etc/" + name)
		if err != nil {
			t.Fatal(err)
		}
		res := sh(t, sb, "cat /etc/"+name)
		if !bytes.Equal(res.Stdout, want) {
			t.Errorf("/etc/%s in the sandbox: %d bytes, not the host's %d", name, len(res.Stdout), len(want))
		}
		checked++
	}
	if checked == 0 {
		testenv.Missing(t, "none of the /etc files the sandbox copies is on this host")
	}
}

func TestConcurrentExecs(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		errs := make(chan error, 6)
		for i := range 6 {
			go func() {
				res, err := sb.Exec(context.Background(), sandbox.ExecRequest{
					Shell: "echo $N > out-$N.txt && cat out-$N.txt",
					Env:   map[string]string{"N": strconv.Itoa(i)},
				})
				if err == nil && string(res.Stdout) != strconv.Itoa(i)+"\n" {
					err = fmt.Errorf("exec %d: %+v", i, res)
				}
				errs <- err
			}()
		}
		for range 6 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		infos, err := sb.ReadDir(context.Background(), ".")
		if err != nil || len(infos) != 6 {
			t.Fatalf("files = %v, %v", infos, err)
		}
	})
}

func TestExecutableWithoutInit(t *testing.T) {
	requireNamespaces(t)
	// /bin/true runs, but never builds a sandbox: that must be an error,
	// not a successful command.
	_, err := local.New(local.Options{Executable: "/bin/true"}).Create(context.Background(), sandbox.Spec{Address: "sandbox.x", StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "MaybeRunInit") {
		t.Fatalf("error = %v, want one naming MaybeRunInit", err)
	}
}

func TestReadOnlyPaths(t *testing.T) {
	requireNamespaces(t)
	// A host directory outside the system directories, shared read-only.
	shared, err := os.MkdirTemp("/var/tmp", "agentctl-ro-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	os.Chmod(shared, 0o755)
	os.WriteFile(filepath.Join(shared, "tool.txt"), []byte("toolchain"), 0o644)
	sb, _ := newSandbox(t, local.Options{ReadOnlyPaths: []string{shared}}, sandbox.Spec{})
	res := sh(t, sb, "cat "+shared+"/tool.txt && ! touch "+shared+"/new 2>/dev/null && echo read-only")
	if string(res.Stdout) != "toolchainread-only\n" {
		t.Fatalf("%+v", res)
	}
	if _, err := local.New(local.Options{ReadOnlyPaths: []string{"/tmp/x"}}).Create(context.Background(), sandbox.Spec{StateDir: t.TempDir()}); err == nil {
		t.Fatal("a read-only path under /tmp was accepted")
	}
}
