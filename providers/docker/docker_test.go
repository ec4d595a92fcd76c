package docker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
)

func TestNewHonoursEnviron(t *testing.T) {
	ctx := context.Background()
	// An unreachable host named in Environ must be the one tried.
	_, err := New(ctx, Options{Environ: []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/docker.sock") {
		t.Fatalf("New with DOCKER_HOST in Environ: err = %v, want it to name the host", err)
	}
	_, err = New(ctx, Options{Environ: []string{"DOCKER_TLS_VERIFY=1"}})
	if err == nil || !strings.Contains(err.Error(), "DOCKER_CERT_PATH") {
		t.Fatalf("TLS verify without cert path: err = %v", err)
	}
	_, err = New(ctx, Options{Environ: []string{"DOCKER_CERT_PATH=/nonexistent/certs"}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/certs") {
		t.Fatalf("missing cert path: err = %v", err)
	}
}

func TestProviderBasics(t *testing.T) {
	p := testProvider(t)
	if p.Kind() != "docker" {
		t.Fatalf("Kind = %q", p.Kind())
	}
	if v := p.APIVersion(); v == "" || v > client.MaxAPIVersion {
		t.Fatalf("negotiated API version %q", v)
	}
	pinned, err := New(context.Background(), Options{Environ: []string{"DOCKER_API_VERSION=1.41"}})
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	if v := pinned.APIVersion(); v != "1.41" {
		t.Fatalf("DOCKER_API_VERSION from Environ ignored: %q", v)
	}
}

func TestCreateLabelsAndSession(t *testing.T) {
	spec := testSpec(t)
	spec.Resources = sandbox.Resources{CPUs: 0.5, MemoryMB: 64, PIDs: 100}
	sb := newSandbox(t, spec)
	p := testProvider(t)
	ctx := context.Background()

	res, err := p.Client().ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Container
	want := map[string]string{sandbox.LabelManaged: "true", sandbox.LabelLineage: spec.Lineage, sandbox.LabelAddress: spec.Address}
	for k, v := range want {
		if c.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Config.Labels[k], v)
		}
	}
	if c.HostConfig.Init == nil || !*c.HostConfig.Init {
		t.Error("container does not run docker's init")
	}
	if string(c.HostConfig.NetworkMode) != "none" {
		t.Errorf("network = %q, want none by default", c.HostConfig.NetworkMode)
	}
	if c.HostConfig.NanoCPUs != 5e8 || c.HostConfig.Memory != 64<<20 || c.HostConfig.PidsLimit == nil || *c.HostConfig.PidsLimit != 100 {
		t.Errorf("resources: cpus %d memory %d pids %v", c.HostConfig.NanoCPUs, c.HostConfig.Memory, c.HostConfig.PidsLimit)
	}
	if c.Config.WorkingDir != "/workspace" {
		t.Errorf("workdir %q", c.Config.WorkingDir)
	}
	if got := strings.TrimSpace(execOK(t, sb, "pwd")); got != "/workspace" {
		t.Errorf("pwd = %q", got)
	}
	// PID 1 is docker's init, which reaps orphans.
	if got := strings.TrimSpace(execOK(t, sb, "cat /proc/1/comm")); got != "docker-init" {
		t.Errorf("pid 1 is %q, want docker-init", got)
	}

	st := sb.Session()
	if st.Provider != "docker" || st.ID != sb.ID() {
		t.Fatalf("session %+v", st)
	}
	img, imgID, _, err := SessionData(st)
	if err != nil || img != TestImage || imgID == "" {
		t.Fatalf("session data: %q %q %v", img, imgID, err)
	}
	if cur, err := p.ImageID(ctx, TestImage); err != nil || cur != imgID {
		t.Fatalf("ImageID = %q, %v; session has %q", cur, err, imgID)
	}
	list, err := p.ListManaged(ctx, spec.Lineage)
	if err != nil || len(list) != 1 || list[0].ID != sb.ID() || list[0].Address != spec.Address {
		t.Fatalf("ListManaged = %+v, %v", list, err)
	}
}

func TestCreateMissingImageNamesIt(t *testing.T) {
	p := testProvider(t)
	spec := testSpec(t)
	// A registry on a closed local port: the pull fails fast, offline.
	spec.Image = "127.0.0.1:9/agentctl/no-such-image:1"
	_, err := p.Create(context.Background(), spec)
	if err == nil {
		t.Fatal("Create with a missing image succeeded")
	}
	if !strings.Contains(err.Error(), spec.Image) || !strings.Contains(err.Error(), "could not be pulled") {
		t.Fatalf("error does not name the image: %v", err)
	}
	if list, _ := p.ListManaged(context.Background(), spec.Lineage); len(list) != 0 {
		t.Fatalf("a container was left behind: %+v", list)
	}
}

func TestCreatePortsNeedNetwork(t *testing.T) {
	p := testProvider(t)
	spec := testSpec(t)
	spec.Ports = []int{8080}
	_, err := p.Create(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "bridge") {
		t.Fatalf("ports with network none: err = %v", err)
	}
}

// A timeout kills its own command's tree (sandboxtest checks that) and
// nothing else: another command's background process lives on, since the
// container is not restarted for an ordinary timeout. A fork bomb is
// bounded by the timeout and the pids limit.
func TestExecTimeoutSparesOthers(t *testing.T) {
	spec := testSpec(t)
	spec.Resources.PIDs = 64 // the fork bomb below must stay small
	sb := newSandbox(t, spec)
	ctx := context.Background()
	execOK(t, sb, "setsid sleep 2009 >/dev/null 2>&1 &")
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "setsid sh -c 'sleep 1001' & echo started; sleep 1003", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 137 {
		t.Fatalf("timeout result %+v", res)
	}
	ps := execOK(t, sb, "ps -o pid,args")
	if strings.Contains(ps, "sleep 100") || !strings.Contains(ps, "sleep 2009") {
		t.Fatalf("after the timeout, want the command's processes gone and the other command's left:\n%s", ps)
	}
	execOK(t, sb, `ps -o pid,args | while read -r p a; do [ "$a" != "sleep 2009" ] || kill "$p"; done`)
	// The bomb starts in a subshell and the shell execs its sleep: once
	// the bomb holds every pid, a fork by the shell itself would fail and
	// end it (exit 2) before the timeout.
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Shell: "b() { b | b & }; (b); exec sleep 1000", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("fork bomb did not time out: exit %d, wall %v", res.ExitCode, res.Wall)
	}
	if ps := execOK(t, sb, "ps -o args"); strings.Count(ps, "\n") > 5 {
		t.Fatalf("fork bomb survivors:\n%s", ps)
	}
}

// A stopped container's files stay readable (sandboxtest checks stop and
// start); a container removed behind agentctl's back is missing.
func TestStoppedAndRemoved(t *testing.T) {
	p := testProvider(t)
	spec := testSpec(t)
	sb := newSandbox(t, spec)
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "keep.txt", []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := sb.ReadFile(ctx, "keep.txt", 0); err != nil || string(b) != "kept" {
		t.Fatalf("read stopped: %q %v", b, err)
	}
	if _, err := p.Client().ContainerRemove(ctx, sb.ID(), client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if st, err := sb.Refresh(ctx); err != nil || st != sandbox.StatusMissing {
		t.Fatalf("Refresh after removal = %v, %v", st, err)
	}
	if _, err := p.Open(ctx, spec, sb.Session()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Open after removal: %v", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Exec after removal: %v", err)
	}
}

// Ports are published on 127.0.0.1 (sandboxtest checks they answer), and
// the session's URLs are PortURL's.
func TestPortsOnLoopback(t *testing.T) {
	spec := testSpec(t)
	spec.Network = "bridge"
	spec.Ports = []int{8080}
	sb := newSandbox(t, spec)
	u, err := sb.PortURL(context.Background(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("URL %q not bound to 127.0.0.1", u)
	}
	if sb.URLs()["8080"] != u {
		t.Fatalf("session URLs %v, PortURL %q", sb.URLs(), u)
	}
	if _, err := sb.PortURL(context.Background(), 9999); err == nil {
		t.Fatal("PortURL of an unpublished port succeeded")
	}
}

func TestUserSetting(t *testing.T) {
	spec := testSpec(t)
	user := "user"
	spec.Settings = &SandboxSettings{User: &user}
	sb := newSandbox(t, spec)
	ctx := context.Background()
	if out := strings.TrimSpace(execOK(t, sb, "id -u; touch made-by-user && stat -c %u made-by-user")); out != "1000\n1000" {
		t.Fatalf("id/owner = %q", out)
	}
	if err := sb.WriteFile(ctx, "w.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(execOK(t, sb, "stat -c %u w.txt; echo more >> w.txt && cat w.txt")); out != "1000\nxmore" {
		t.Fatalf("file written by WriteFile as seen by the user: %q", out)
	}
	// A timeout as a non-root user still kills the tree.
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "setsid sleep 1004 & sleep 1005", Timeout: time.Second})
	if err != nil || !res.TimedOut {
		t.Fatalf("timeout: %+v %v", res, err)
	}
	if ps := execOK(t, sb, "ps -o args"); strings.Contains(ps, "sleep 100") {
		t.Fatalf("processes left:\n%s", ps)
	}
}

func TestCommitSnapshot(t *testing.T) {
	spec := testSpec(t)
	sb := newSandbox(t, spec)
	ctx := context.Background()
	if _, err := sb.Commit(ctx, "agentctl-test-commit:off"); err == nil {
		t.Fatal("Commit without commit_snapshot succeeded")
	}
	spec = testSpec(t)
	commit := true
	spec.Settings = &SandboxSettings{Commit: &commit}
	sb = newSandbox(t, spec)
	if err := sb.WriteFile(ctx, "state.txt", []byte("committed"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := "agentctl-test-commit:" + randHex(4)
	id, err := sb.Commit(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	p := testProvider(t)
	t.Cleanup(func() {
		_, _ = p.Client().ImageRemove(context.Background(), id, client.ImageRemoveOptions{Force: true})
	})
	spec2 := testSpec(t)
	spec2.Image = ref
	sb2 := newSandbox(t, spec2)
	if out := execOK(t, sb2, "cat state.txt"); out != "committed" {
		t.Fatalf("from committed image: %q", out)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	removeBinary()
	// Leave no test container behind even when a test failed.
	if provVal != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		list, _ := provVal.ListManaged(ctx, "")
		for _, c := range list {
			if strings.HasPrefix(c.Lineage, testLineagePrefix) {
				_, _ = provVal.Client().ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
		cancel()
	}
	os.Exit(code)
}

// The ephemeral environment reaches commands (sandboxtest checks that)
// and is in no container configuration.
func TestEphemeralEnvNotInContainer(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	ws := &sandbox.Workspace{Sandbox: sb, EphemeralEnv: map[string]string{"DB_TOKEN": "s3cr3t-token"}}
	ctx := context.Background()
	if res, err := ws.Exec(ctx, sandbox.ExecRequest{Shell: "echo ${#DB_TOKEN}"}); err != nil || string(res.Stdout) != "12\n" {
		t.Fatalf("ephemeral env: %q, %v", res.Stdout, err)
	}
	res, err := testProvider(t).Client().ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.Raw), "s3cr3t-token") {
		t.Fatal("ephemeral env leaked into the container config")
	}
}
