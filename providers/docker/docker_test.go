package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
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

func TestFilesRoundTrip(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "a/b/c.txt", []byte("hello\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "a/b/c.txt", 0)
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if _, err := sb.ReadFile(ctx, "a/b/c.txt", 3); err == nil {
		t.Fatal("ReadFile over the limit succeeded")
	}
	fi, err := sb.Stat(ctx, "a/b/c.txt")
	if err != nil || fi.Size != 6 || fi.Mode.Perm() != 0o640 || fi.Path != "a/b/c.txt" {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	// Shell sees the same file.
	if out := execOK(t, sb, "cat a/b/c.txt"); out != "hello\n" {
		t.Fatalf("cat = %q", out)
	}
	if err := sb.Mkdir(ctx, "x/y/z"); err != nil {
		t.Fatal(err)
	}
	if err := sb.Mkdir(ctx, "x/y/z"); err != nil {
		t.Fatalf("Mkdir of an existing dir: %v", err)
	}
	execOK(t, sb, "ln -s a/b/c.txt link && touch .hidden")
	ents, err := sb.ReadDir(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Path)
	}
	if strings.Join(names, ",") != ".hidden,a,link,x" {
		t.Fatalf("ReadDir = %v", names)
	}
	if ents[2].Target != "a/b/c.txt" || ents[2].Mode&fs.ModeSymlink == 0 || !ents[1].Mode.IsDir() {
		t.Fatalf("ReadDir entries %+v", ents)
	}
	// A link inside the workspace is followed.
	if got, err := sb.ReadFile(ctx, "link", 0); err != nil || string(got) != "hello\n" {
		t.Fatalf("ReadFile through an inner link = %q, %v", got, err)
	}
	if err := sb.WriteFile(ctx, "link", []byte("via link"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, sb, "cat a/b/c.txt"); out != "via link" {
		t.Fatalf("write through inner link: %q", out)
	}
	if err := sb.Remove(ctx, "link"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Stat(ctx, "link"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat after Remove: %v", err)
	}
	if err := sb.Remove(ctx, "x/y"); err == nil {
		t.Fatal("Remove of a non-empty dir succeeded")
	}
	if _, err := sb.ReadFile(ctx, "nope", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile missing: %v", err)
	}
	// Absolute paths inside the root are accepted.
	if got, err := sb.ReadFile(ctx, "/workspace/a/b/c.txt", 0); err != nil || string(got) != "via link" {
		t.Fatalf("absolute inside root: %q %v", got, err)
	}
}

func TestCopyInOut(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	ctx := context.Background()
	in := tarOf(t,
		&tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "src/main.go", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "package main\n"},
		&tar.Header{Name: "./deep/er/file.txt", Typeflag: tar.TypeReg, Mode: 0o4755, Linkname: "deep"},
		&tar.Header{Name: "src/link", Typeflag: tar.TypeSymlink, Linkname: "main.go"},
	)
	if err := sb.CopyIn(ctx, "proj", in); err != nil {
		t.Fatal(err)
	}
	if got := execOK(t, sb, "cat proj/src/main.go proj/deep/er/file.txt proj/src/link; stat -c %a proj/deep/er/file.txt"); got != "package main\ndeeppackage main\n755\n" {
		t.Fatalf("after CopyIn: %q", got)
	}
	rc, err := sb.CopyOut(ctx, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b) + h.Linkname
	}
	want := map[string]string{"src/": "", "src/main.go": "package main\n", "src/link": "main.go",
		"deep/": "", "deep/er/": "", "deep/er/file.txt": "deep"}
	if len(got) != len(want) {
		t.Fatalf("CopyOut members %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("CopyOut member %q = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	// Hardlinks in the workspace come out as regular files, so the
	// archive is accepted by CopyIn.
	execOK(t, sb, "ln proj/src/main.go proj/hard")
	// Round trip into a second sandbox, as a snapshot restore does.
	rc2, err := sb.CopyOut(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	sb2 := newSandbox(t, testSpec(t))
	if err := sb2.CopyIn(ctx, ".", rc2); err != nil {
		t.Fatal(err)
	}
	if got := execOK(t, sb2, "cat proj/src/link proj/hard"); got != "package main\npackage main\n" {
		t.Fatalf("restored: %q", got)
	}
}

func TestExec(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	ctx := context.Background()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "echo out; echo err >&2; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.TimedOut || res.Wall <= 0 {
		t.Fatalf("exec result %+v", res)
	}
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("from stdin")})
	if err != nil || string(res.Stdout) != "from stdin" || res.ExitCode != 0 {
		t.Fatalf("stdin: %+v %v", res, err)
	}
	execOK(t, sb, "mkdir -p sub/dir")
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"sh", "-c", "pwd; echo $FOO"}, Workdir: "sub/dir", Env: map[string]string{"FOO": "bar baz"}})
	if err != nil || string(res.Stdout) != "/workspace/sub/dir\nbar baz\n" {
		t.Fatalf("workdir/env: %q %v", res.Stdout, err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true", Workdir: "../etc"}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("workdir .. : %v", err)
	}
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/no/such/program"}})
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("missing program: %+v %v", res, err)
	}
	// Large output keeps head and tail.
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Shell: "echo BEGIN; seq 1 200000; echo END", OutputLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.OriginalStdout < 1_000_000 || !strings.HasPrefix(string(res.Stdout), "BEGIN\n1\n") || !strings.HasSuffix(string(res.Stdout), "200000\nEND\n") || len(res.Stdout) > 1200 {
		t.Fatalf("truncation: truncated=%v original=%d len=%d", res.Truncated, res.OriginalStdout, len(res.Stdout))
	}
}

func TestExecContextCancel(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(500 * time.Millisecond); cancel() }()
	_, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "sleep 1006"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec with a cancelled context: %v", err)
	}
	if ps := execOK(t, sb, "ps -o args"); strings.Contains(ps, "sleep 1006") {
		t.Fatalf("process left after cancel:\n%s", ps)
	}
}

func TestExecTimeoutKillsTree(t *testing.T) {
	spec := testSpec(t)
	spec.Resources.PIDs = 64 // the fork bomb below must stay small
	sb := newSandbox(t, spec)
	ctx := context.Background()
	// Another command's background process, which the timeout below must
	// leave alone (the container is not restarted for an ordinary
	// timeout).
	execOK(t, sb, "setsid sleep 2009 >/dev/null 2>&1 &")
	// A child in its own session and a grandchild in the background: a
	// process-group kill would miss the first.
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Shell:   "setsid sh -c 'sleep 1001' & (sleep 1002 &) ; echo started; sleep 1003",
		Timeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || string(res.Stdout) != "started\n" || res.ExitCode != 137 {
		t.Fatalf("timeout result %+v", res)
	}
	ps := execOK(t, sb, "ps -o pid,args")
	if strings.Contains(ps, "sleep 100") {
		t.Fatalf("processes left after timeout:\n%s", ps)
	}
	if !strings.Contains(ps, "sleep 2009") {
		t.Fatalf("the timeout killed another command's process too:\n%s", ps)
	}
	execOK(t, sb, `ps -o pid,args | while read -r p a; do [ "$a" != "sleep 2009" ] || kill "$p"; done`)
	// A fork bomb bounded by the timeout (and the pids limit of the test).
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

func TestLifecycle(t *testing.T) {
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
	if st, err := sb.Refresh(ctx); err != nil || st != sandbox.StatusStopped {
		t.Fatalf("Refresh after Stop = %v, %v", st, err)
	}
	// Files are readable from a stopped container.
	if b, err := sb.ReadFile(ctx, "keep.txt", 0); err != nil || string(b) != "kept" {
		t.Fatalf("read stopped: %q %v", b, err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("Exec on a stopped sandbox: %v", err)
	}
	// Reconnect from session state, as the next apply does, and restart.
	sb2, err := p.Open(ctx, spec, sb.Session())
	if err != nil {
		t.Fatal(err)
	}
	if err := sb2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := sb2.Refresh(ctx); err != nil || st != sandbox.StatusRunning {
		t.Fatalf("Refresh after Start = %v, %v", st, err)
	}
	if out := execOK(t, sb2.(*Sandbox), "cat keep.txt"); out != "kept" {
		t.Fatalf("after restart: %q", out)
	}
	// Removed behind our back.
	if _, err := p.Client().ContainerRemove(ctx, sb.ID(), client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if st, err := sb2.Refresh(ctx); err != nil || st != sandbox.StatusMissing {
		t.Fatalf("Refresh after removal = %v, %v", st, err)
	}
	if _, err := p.Open(ctx, spec, sb.Session()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Open after removal: %v", err)
	}
	if _, err := sb2.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Exec after removal: %v", err)
	}
	if err := sb2.Delete(ctx); err != nil {
		t.Fatalf("Delete of a missing container: %v", err)
	}
}

func TestDeleteLeavesNothing(t *testing.T) {
	p := testProvider(t)
	spec := testSpec(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		sb, err := p.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			_ = sb.Stop(ctx)
		}
		if err := sb.Delete(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if list, err := p.ListManaged(ctx, spec.Lineage); err != nil || len(list) != 0 {
		t.Fatalf("containers left: %+v %v", list, err)
	}
}

func TestPortsReachableFromHost(t *testing.T) {
	spec := testSpec(t)
	spec.Network = "bridge"
	spec.Ports = []int{8080}
	sb := newSandbox(t, spec)
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "www/index.html", []byte("hello from the sandbox"), 0o644); err != nil {
		t.Fatal(err)
	}
	execOK(t, sb, "httpd -p 8080 -h /workspace/www")
	u, err := sb.PortURL(ctx, 8080)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("URL %q not bound to 127.0.0.1", u)
	}
	if sb.URLs()["8080"] != u {
		t.Fatalf("session URLs %v, PortURL %q", sb.URLs(), u)
	}
	var body []byte
	for i := 0; i < 50; i++ {
		resp, err := http.Get(u + "/index.html")
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(body) != "hello from the sandbox" {
		t.Fatalf("GET %s = %q", u, body)
	}
	if _, err := sb.PortURL(ctx, 9999); err == nil {
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

// The escape cases of the path policy that apply to containers.
func TestEscapes(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	ctx := context.Background()
	execOK(t, sb, "ln -s /etc/passwd passwd; ln -s / rootlink; ln -s ../etc up; mkdir -p d; ln -s ../../etc d/up2; ln -s /workspace/d inner")
	for _, p := range []string{"passwd", "rootlink/etc/passwd", "up/passwd", "d/up2/passwd", "inner/up2/passwd", "../etc/passwd", "/etc/passwd", "a/../../etc/passwd"} {
		if _, err := sb.ReadFile(ctx, p, 0); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("ReadFile(%q) = %v, want ErrPathEscape", p, err)
		}
		if err := sb.WriteFile(ctx, p, []byte("pwned"), 0o644); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("WriteFile(%q) = %v, want ErrPathEscape", p, err)
		}
	}
	for _, p := range []string{"rootlink/tmp/x", "up/x"} {
		if err := sb.Mkdir(ctx, p); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("Mkdir(%q) = %v", p, err)
		}
		if err := sb.CopyIn(ctx, p, tarOf(t)); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("CopyIn(%q) = %v", p, err)
		}
	}
	if _, err := sb.ReadDir(ctx, "rootlink"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("ReadDir(rootlink) = %v", err)
	}
	if _, err := sb.CopyOut(ctx, "rootlink"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("CopyOut(rootlink) = %v", err)
	}
	// Stat of the link itself is allowed and shows its target.
	if fi, err := sb.Stat(ctx, "passwd"); err != nil || fi.Target != "/etc/passwd" {
		t.Errorf("Stat(passwd) = %+v, %v", fi, err)
	}
	// Removing the link removes the link, not the target.
	if err := sb.Remove(ctx, "passwd"); err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, sb, "head -c 5 /etc/passwd"); out != "root:" {
		t.Fatalf("/etc/passwd changed: %q", out)
	}

	hostile := []struct {
		name string
		tar  *bytes.Buffer
		want error
	}{
		{"absolute", tarOf(t, &tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg, Linkname: "x"}), sandbox.ErrPathEscape},
		{"dotdot", tarOf(t, &tar.Header{Name: "a/../../evil", Typeflag: tar.TypeReg, Linkname: "x"}), sandbox.ErrPathEscape},
		{"write through symlink out", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, &tar.Header{Name: "l/evil", Typeflag: tar.TypeReg, Linkname: "x"}), sandbox.ErrPathEscape},
		{"directory over symlink out", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, &tar.Header{Name: "l/", Typeflag: tar.TypeDir}, &tar.Header{Name: "l/evil", Typeflag: tar.TypeReg, Linkname: "x"}), sandbox.ErrPathEscape},
		{"hardlink", tarOf(t, &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}), hostfs.ErrUnsafeArchive},
		{"device", tarOf(t, &tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1}), hostfs.ErrUnsafeArchive},
		{"fifo", tarOf(t, &tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}), hostfs.ErrUnsafeArchive},
	}
	for _, h := range hostile {
		if err := sb.CopyIn(ctx, "in", h.tar); !errors.Is(err, h.want) {
			t.Errorf("CopyIn %s: %v, want %v", h.name, err, h.want)
		}
	}
	if out := execOK(t, sb, "ls /etc"); strings.Contains(out, "evil") {
		t.Fatal("/etc/evil was written")
	}
	// Links whose target leaves the workspace are kept as links (a
	// restored Python venv has them), with their target unchanged.
	kept := tarOf(t, &tar.Header{Name: "venv/bin/python", Typeflag: tar.TypeSymlink, Linkname: "/usr/bin/python3"},
		&tar.Header{Name: "venv/up", Typeflag: tar.TypeSymlink, Linkname: "../../../etc"})
	if err := sb.CopyIn(ctx, "kept", kept); err != nil {
		t.Fatalf("CopyIn of links leaving the workspace: %v", err)
	}
	for p, want := range map[string]string{"kept/venv/bin/python": "/usr/bin/python3", "kept/venv/up": "../../../etc"} {
		if fi, err := sb.Stat(ctx, p); err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != want {
			t.Errorf("%s: %+v, %v; want a link to %s", p, fi, err, want)
		}
	}
	// Writing through a symlink that already exists in the container: the
	// link is replaced by a directory, nothing reaches /etc.
	execOK(t, sb, "mkdir -p in2 && ln -s /etc in2/etc")
	err := sb.CopyIn(ctx, "in2", tarOf(t, &tar.Header{Name: "etc/evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "pwned"}))
	if err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, sb, "ls /etc/evil 2>/dev/null; cat in2/etc/evil"); out != "pwned" {
		t.Fatalf("write through existing link: %q", out)
	}
	if out := execOK(t, sb, "ls /etc"); strings.Contains(out, "evil") {
		t.Fatal("/etc/evil was written")
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

// Through the shared Workspace wrapper, as tools use it: manifest env and
// ephemeral env reach the command, sensitive values are scrubbed, and
// parallel tool calls on one sandbox do not interfere.
func TestWorkspaceExecParallel(t *testing.T) {
	sb := newSandbox(t, testSpec(t))
	ws := &sandbox.Workspace{
		Sandbox:      sb,
		Env:          map[string]string{"REGION": "eu"},
		EphemeralEnv: map[string]string{"DB_TOKEN": "s3cr3t-token"},
		Scrub:        sandbox.NewScrubber([]string{"s3cr3t-token"}),
	}
	ctx := context.Background()
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		go func(i int) {
			res, err := ws.Exec(ctx, sandbox.ExecRequest{Shell: "echo $REGION $DB_TOKEN; echo $DB_TOKEN >&2"})
			switch {
			case err != nil:
				errs <- err
			case string(res.Stdout) != "eu (sensitive)\n" || string(res.Stderr) != "(sensitive)\n":
				errs <- fmt.Errorf("exec %d: stdout %q stderr %q", i, res.Stdout, res.Stderr)
			default:
				errs <- nil
			}
		}(i)
	}
	for i := 0; i < 6; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// The ephemeral value is in no container config.
	p := testProvider(t)
	res, err := p.Client().ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.Raw), "s3cr3t-token") {
		t.Fatal("ephemeral env leaked into the container config")
	}
}

// The restore flow the engine runs: snapshot the workspace to a tar on
// the host, lose the container, see it missing, create a fresh one and
// restore the snapshot into it.
func TestSnapshotRestoreAfterLoss(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	spec := testSpec(t)
	sb := newSandbox(t, spec)
	execOK(t, sb, "mkdir -p out && echo result > out/report.txt && ln -s out/report.txt latest && chmod 600 out/report.txt")
	// Links whose target leaves the workspace (a venv has them) come back
	// as links with the same target.
	links := map[string]string{"abslink": "/etc/passwd", "up": "../etc", "out/deep": "../../../etc", "venv/bin/python": "/usr/bin/python3"}
	execOK(t, sb, "mkdir -p venv/bin && ln -s /etc/passwd abslink && ln -s ../etc up && ln -s ../../../etc out/deep && ln -s /usr/bin/python3 venv/bin/python")
	rc, err := sb.CopyOut(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if _, err := io.Copy(&snap, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if _, err := p.Client().ContainerRemove(ctx, sb.ID(), client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if st, _ := sb.Refresh(ctx); st != sandbox.StatusMissing {
		t.Fatalf("status after loss = %v", st)
	}
	fresh := newSandbox(t, spec)
	if err := fresh.CopyIn(ctx, ".", &snap); err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, fresh, "cat latest; stat -c %a out/report.txt"); out != "result\n600\n" {
		t.Fatalf("restored workspace: %q", out)
	}
	for p, want := range links {
		if fi, err := fresh.Stat(ctx, p); err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != want {
			t.Errorf("%s after the restore: %+v, %v; want a link to %s", p, fi, err, want)
		}
	}
	if out := execOK(t, fresh, "head -c 5 /etc/passwd"); out != "root:" {
		t.Fatalf("/etc/passwd in the container changed: %q", out)
	}
}
