package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
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

// A command's environment is the request's over the sandbox's own (HOME
// is the workspace, PATH the default), never agentctl's (sandboxtest
// checks the rest of exec).
func TestExecEnvironment(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		t.Setenv("AGENTCTL_TEST_HOST_ONLY", "leaked")
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		res, err := sb.Exec(context.Background(), sandbox.ExecRequest{
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

// The private /tmp lasts across the commands of one sandbox, and with
// namespaces it is not the host's.
func TestPrivateTmp(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		sh(t, sb, "echo kept > /tmp/agentctl-local-test")
		res := sh(t, sb, "cat /tmp/agentctl-local-test")
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

// A sandbox is a directory of its own, private to agentctl's user
// (sandboxtest checks the lifecycle).
func TestSandboxDirectoryPrivate(t *testing.T) {
	sb, stateDir := newSandbox(t, local.Options{Isolation: local.IsolationNone}, sandbox.Spec{})
	if fi, err := os.Stat(filepath.Dir(sb.ID())); err != nil || fi.Mode().Perm()&0o077 != 0 && filepath.Dir(sb.ID()) != stateDir {
		t.Fatalf("state dir permissions: %v %v", fi, err)
	}
	if fi, _ := os.Stat(sb.ID()); fi.Mode().Perm() != 0o700 {
		t.Errorf("sandbox directory mode = %v, want 0700", fi.Mode().Perm())
	}
	if _, err := sb.PortURL(context.Background(), 8080); err != nil {
		t.Errorf("port url without isolation: %v", err)
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
