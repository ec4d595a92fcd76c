package e2b

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/providers/e2b/e2bfake"
	"github.com/agentctl/agentctl/sandbox"
)

type env struct {
	fake   *e2bfake.Server
	p      *Provider
	spec   sandbox.Spec
	sleeps *[]time.Duration
}

func newEnv(t testing.TB) env {
	t.Helper()
	f := e2bfake.New(t)
	p, err := New(Options{Environ: []string{"E2B_API_KEY=" + f.APIKey, "E2B_DOMAIN=" + e2bfake.Domain}, HTTPClient: f.Client(), TempDir: f.Root + "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sleeps := &[]time.Duration{}
	p.client.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*sleeps = append(*sleeps, d)
		mu.Unlock()
		return ctx.Err()
	}
	spec := sandbox.Spec{Address: `sandbox.review["pricing"]`, Lineage: "lin-1", Root: f.Root + "/workspace", Ports: []int{8080},
		Network: "none", Settings: &Settings{Metadata: map[string]string{"team": "data"}, Env: map[string]string{"GREETING": "hello"}, Timeout: 10 * time.Minute}}
	return env{fake: f, p: p, spec: spec, sleeps: sleeps}
}

func (e env) create(t testing.TB) *Workspace {
	t.Helper()
	sb, err := e.p.Create(context.Background(), e.spec)
	if err != nil {
		t.Fatal(err)
	}
	return sb.(*Workspace)
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w := e.create(t)
	body := e.fake.Created(w.ID())
	md, _ := body["metadata"].(map[string]any)
	if md["team"] != "data" || md[sandbox.LabelAddress] != e.spec.Address || md[sandbox.LabelLineage] != "lin-1" || md[sandbox.LabelManaged] != "true" {
		t.Errorf("metadata = %v", md)
	}
	if body["timeout"] != float64(600) || body["templateID"] != "base" || body["allow_internet_access"] != false || body["secure"] != true {
		t.Errorf("create body = %v", body)
	}
	if ev, _ := body["envVars"].(map[string]any); ev["GREETING"] != "hello" {
		t.Errorf("envVars = %v", body["envVars"])
	}
	if d := time.Until(e.fake.EndAt(w.ID())); d < 9*time.Minute || d > 10*time.Minute {
		t.Errorf("the sandbox expires in %s, want the 10m timeout", d)
	}
	if st, err := w.Refresh(ctx); err != nil || st != sandbox.StatusRunning {
		t.Fatalf("refresh = %v, %v", st, err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if e.fake.State(w.ID()) != "paused" {
		t.Fatalf("state after stop = %q, want paused", e.fake.State(w.ID()))
	}
	if st, _ := w.Refresh(ctx); st != sandbox.StatusStopped {
		t.Errorf("refresh of a paused sandbox = %v", st)
	}
	if err := w.Stop(ctx); err != nil {
		t.Errorf("pausing a paused sandbox: %v", err)
	}
	if _, err := w.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("exec in a paused sandbox: %v, want ErrUnavailable", err)
	}
	// Reopen from the session, as a later command does, and resume.
	sb, err := e.p.Open(ctx, e.spec, w.Session())
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if e.fake.State(w.ID()) != "running" {
		t.Fatalf("state after start = %q", e.fake.State(w.ID()))
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: `echo "$GREETING"`})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "hello" {
		t.Fatalf("exec after resume: %q, %v", res.Stdout, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := e.fake.IDs(); len(ids) != 0 {
		t.Errorf("after delete E2B still has %v", ids)
	}
	if _, err := os.Stat(e.spec.Root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the workspace survived the delete: %v", err)
	}
	if st, err := sb.Refresh(ctx); err != nil || st != sandbox.StatusMissing {
		t.Errorf("refresh after delete = %v, %v", st, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
	if _, err := e.p.Open(ctx, e.spec, w.Session()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("open after delete: %v, want ErrNotFound", err)
	}
}

func TestTimeoutReapsAbandonedSandbox(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	e.fake.Expire(w.ID())
	if st, err := w.Refresh(context.Background()); err != nil || st != sandbox.StatusMissing {
		t.Errorf("refresh after the timeout = %v, %v; want missing", st, err)
	}

	e.spec.Address = "sandbox.paused"
	e.spec.Settings = &Settings{OnTimeout: "pause"}
	w = e.create(t)
	if e.fake.Created(w.ID())["autoPause"] != true {
		t.Errorf("on_timeout = pause did not ask for autoPause: %v", e.fake.Created(w.ID()))
	}
	e.fake.Expire(w.ID())
	if st, _ := w.Refresh(context.Background()); st != sandbox.StatusStopped {
		t.Errorf("refresh after the timeout with on_timeout = pause = %v, want stopped", st)
	}
}

func TestKeepAliveExtendsTimeout(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	before := e.fake.EndAt(w.ID())
	// A quarter of the timeout has passed since it was last set.
	w.extended = time.Now().Add(-3 * time.Minute)
	time.Sleep(1100 * time.Millisecond)
	if _, err := w.Exec(context.Background(), sandbox.ExecRequest{Shell: "true"}); err != nil {
		t.Fatal(err)
	}
	if after := e.fake.EndAt(w.ID()); !after.After(before) {
		t.Errorf("exec did not extend the timeout: %s, then %s", before, after)
	}
}

func TestExec(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	res, err := w.Exec(ctx, sandbox.ExecRequest{Shell: "echo out; echo err >&2; exit 3"})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("exec = %+v, %v", res, err)
	}
	res, err = w.Exec(ctx, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("fed in\n"), Env: map[string]string{"X": "1"}})
	if err != nil || string(res.Stdout) != "fed in\n" {
		t.Fatalf("stdin: %+v, %v", res, err)
	}
	if err := w.Mkdir(ctx, "sub"); err != nil {
		t.Fatal(err)
	}
	res, err = w.Exec(ctx, sandbox.ExecRequest{Shell: `pwd; echo "$X"`, Workdir: "sub", Env: map[string]string{"X": "it's $set"}})
	if err != nil || string(res.Stdout) != e.spec.Root+"/sub\nit's $set\n" {
		t.Fatalf("workdir and env: %q, %v", res.Stdout, err)
	}
	res, err = w.Exec(ctx, sandbox.ExecRequest{Shell: "head -c 100000 /dev/zero | tr '\\0' a", OutputLimit: 1000})
	if err != nil || !res.Truncated || res.OriginalStdout != 100000 || len(res.Stdout) > 1100 {
		t.Errorf("output limit: truncated %v, original %d, kept %d, %v", res.Truncated, res.OriginalStdout, len(res.Stdout), err)
	}
	if _, err := w.Exec(ctx, sandbox.ExecRequest{Shell: "true", User: "mallory"}); err == nil || !strings.Contains(err.Error(), `user "mallory" is not declared`) {
		t.Errorf("undeclared user: %v", err)
	}
	if _, err := w.Exec(ctx, sandbox.ExecRequest{Shell: "true", Workdir: "../out"}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("workdir outside the workspace: %v", err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(e.spec.Root, "away")); err != nil {
		t.Fatal(err)
	}
	if res, err := w.Exec(ctx, sandbox.ExecRequest{Shell: "touch escaped", Workdir: "away"}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("workdir through a symlink out of the workspace: %+v, %v", res, err)
	}
}

func TestExecTimeoutKillsTree(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	marker := filepath.Join(e.spec.Root, "survivor")
	start := time.Now()
	// A child in a session of its own and an orphaned grandchild too.
	res, err := w.Exec(ctx, sandbox.ExecRequest{Shell: "setsid sh -c 'sleep 2; touch " + marker + "' & (sh -c 'sleep 2; touch " + marker + "' &); echo started; sleep 30", Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != -1 || string(res.Stdout) != "started\n" {
		t.Errorf("timed out exec = %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Error("a child of the timed-out command kept running")
	}
}

func TestFiles(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	if err := w.WriteFile(ctx, "a/b/run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := w.ReadFile(ctx, "a/b/run.sh", 0)
	if err != nil || string(got) != "#!/bin/sh\necho hi\n" {
		t.Fatalf("read back %q, %v", got, err)
	}
	fi, err := w.Stat(ctx, "a/b/run.sh")
	if err != nil || fi.Mode.Perm() != 0o755 || fi.Size != 18 {
		t.Errorf("stat = %+v, %v", fi, err)
	}
	if _, err := w.ReadFile(ctx, "a/b/run.sh", 5); err == nil || !strings.Contains(err.Error(), "larger than 5 bytes") {
		t.Errorf("limit: %v", err)
	}
	if _, err := w.ReadFile(ctx, "missing", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.Symlink("/etc", filepath.Join(e.spec.Root, "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReadFile(ctx, "out/hostname", 0); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("read through a symlink out of the workspace: %v", err)
	}
	if err := w.WriteFile(ctx, "out/x", []byte("x"), 0); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("write through a symlink out of the workspace: %v", err)
	}
	if res, err := w.Exec(ctx, sandbox.ExecRequest{Shell: "mkfifo pipe && ln a/b/run.sh a/b/hard"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("mkfifo: %+v, %v", res, err)
	}
	list, err := w.ReadDir(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]fs.FileMode{}
	for _, f := range list {
		kinds[f.Path] = f.Mode.Type()
	}
	if kinds["a"] != fs.ModeDir || kinds["out"] != fs.ModeSymlink || kinds["pipe"] != fs.ModeNamedPipe || len(kinds) != 3 {
		t.Errorf("readdir = %v", list)
	}
	for _, f := range list {
		if f.Path == "out" && f.Target != "/etc" {
			t.Errorf("the link's target = %q, want what it says, /etc", f.Target)
		}
	}
	if err := w.Remove(ctx, "pipe"); err != nil {
		t.Fatal(err)
	}
	if err := w.Remove(ctx, "a"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("removing a full directory: %v", err)
	}
	if err := w.Remove(ctx, "out"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat("/etc/hostname"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if _, err := w.Stat(ctx, "out"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat after remove: %v", err)
	}
	// A tree out and back in keeps modes and content.
	rc, err := w.CopyOut(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CopyIn(ctx, "copy", strings.NewReader(string(tarball))); err != nil {
		t.Fatal(err)
	}
	fi, err = w.Stat(ctx, "copy/b/run.sh")
	if err != nil || fi.Mode.Perm() != 0o755 {
		t.Errorf("copied file: %+v, %v", fi, err)
	}
	// A hard-linked file comes out as a file (a restore refuses links).
	if b, err := w.ReadFile(ctx, "copy/b/hard", 0); err != nil || string(b) != "#!/bin/sh\necho hi\n" {
		t.Errorf("hard-linked file after a copy: %q, %v", b, err)
	}
	if m, _ := filepath.Glob(e.fake.Root + "/tmp/agentctl-*"); len(m) > 0 {
		t.Errorf("transfer files left behind: %v", m)
	}
}

func TestPTY(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	p, err := w.StartProcess(context.Background(), sandbox.ProcessRequest{Shell: `test -t 0 && echo on-a-tty; stty size; read line; echo "got $line"; exit 7`, TTY: true, Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(p.Stdin(), "typed\n"); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	code, err := p.Wait()
	if err != nil || code != 7 {
		t.Errorf("wait = %d, %v", code, err)
	}
	for _, want := range []string{"on-a-tty", "30 100", "got typed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("terminal output %q lacks %q", out, want)
		}
	}
}

func TestAttachedProcess(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	p, err := w.StartProcess(context.Background(), sandbox.ProcessRequest{Argv: []string{"sh", "-c", "cat; echo done >&2"}})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(p.Stdin(), "line one\n")
	p.Stdin().Close()
	var stderr []byte
	done := make(chan struct{})
	go func() { stderr, _ = io.ReadAll(p.Stderr()); close(done) }()
	out, _ := io.ReadAll(p.Stdout())
	<-done
	code, err := p.Wait()
	if err != nil || code != 0 || string(out) != "line one\n" || string(stderr) != "done\n" {
		t.Errorf("process: %d, %v, out %q, err %q", code, err, out, stderr)
	}
	// Kill ends a process that would run for ever, and its children.
	p, err = w.StartProcess(context.Background(), sandbox.ProcessRequest{Shell: "sleep 300 & sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != 137 || err != nil {
		t.Errorf("killed process: %d, %v", code, err)
	}
}

func TestPortURL(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served by the sandbox") })}
	go srv.Serve(ln)
	defer srv.Close()
	e.spec.Ports = []int{port}
	w := e.create(t)
	u, err := w.PortURL(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://" + strconv.Itoa(port) + "-" + w.ID() + "." + e2bfake.Domain; u != want {
		t.Errorf("url = %s, want %s", u, want)
	}
	resp, err := e.fake.Client().Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "served by the sandbox" {
		t.Errorf("GET %s = %q", u, b)
	}
	if _, err := w.PortURL(context.Background(), 9); err == nil || !strings.Contains(err.Error(), "not exposed") {
		t.Errorf("unexposed port: %v", err)
	}
}

func TestLeftoversAndFailedCreate(t *testing.T) {
	e := newEnv(t)
	old := e.create(t)
	other := e.spec
	other.Address = "sandbox.other"
	keep, err := e.p.Create(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	w := e.create(t)
	ids := e.fake.IDs()
	if len(ids) != 2 || (ids[0] != w.ID() && ids[1] != w.ID()) || (ids[0] != keep.ID() && ids[1] != keep.ID()) {
		t.Errorf("after a create at the same address E2B has %v; want the new %s and the other address's %s (not %s)", ids, w.ID(), keep.ID(), old.ID())
	}
	// The answer to a create is lost after E2B created the sandbox: it is
	// killed, not left running untracked.
	e.fake.Fail(e2bfake.Fault{Method: "POST", PathContains: "/sandboxes", Status: 500, Count: 1, After: true})
	third := e.spec
	third.Address = "sandbox.third"
	if _, err := e.p.Create(context.Background(), third); err == nil || !strings.Contains(err.Error(), "HTTP 500") {
		t.Fatalf("create with a lost answer: %v", err)
	}
	if n := len(e.fake.IDs()); n != 2 {
		t.Errorf("a failed create left a sandbox: %v", e.fake.IDs())
	}
	// A workspace root the template's user cannot create kills the
	// sandbox it made.
	bad := e.spec
	bad.Address, bad.Root = "sandbox.bad", "/proc/agentctl-cannot"
	if _, err := e.p.Create(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "workspace root") {
		t.Fatalf("create with a bad root: %v", err)
	}
	if n := len(e.fake.IDs()); n != 2 {
		t.Errorf("a create whose root failed left a sandbox: %v", e.fake.IDs())
	}
}

func TestRetries(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	e.fake.Fail(e2bfake.Fault{Method: "GET", PathContains: "/sandboxes/", Status: 429, RetryAfter: "7", Count: 2})
	if _, err := w.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(*e.sleeps) != 2 || (*e.sleeps)[0] != 7*time.Second {
		t.Errorf("waits = %v, want two of 7s (Retry-After)", *e.sleeps)
	}
	// A create is not sent again on a 500 (E2B may have made it)...
	e.fake.Fail(e2bfake.Fault{Method: "POST", PathContains: "/sandboxes", Status: 500, Count: 1})
	s2 := e.spec
	s2.Address = "sandbox.two"
	if _, err := e.p.Create(context.Background(), s2); err == nil || !strings.Contains(err.Error(), "E2B server error (HTTP 500") {
		t.Errorf("create on 500: %v", err)
	}
	// ...but is on a 429, which E2B answers before doing anything.
	e.fake.Fail(e2bfake.Fault{Method: "POST", PathContains: "/sandboxes", Status: 429, Count: 1})
	if _, err := e.p.Create(context.Background(), s2); err != nil {
		t.Errorf("create after a 429: %v", err)
	}
	e.fake.Fail(e2bfake.Fault{Method: "GET", PathContains: "/sandboxes/", Status: 429, Count: 10})
	_, err := w.Refresh(context.Background())
	if err == nil || !strings.Contains(err.Error(), "rate limited by E2B (HTTP 429 after 5 attempts") {
		t.Errorf("persistent 429: %v", err)
	}
}

func TestBadKey(t *testing.T) {
	f := e2bfake.New(t)
	p, err := New(Options{APIKey: "e2b_wrong_key", Domain: e2bfake.Domain, HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Create(context.Background(), sandbox.Spec{Address: "sandbox.x", Root: f.Root + "/w"})
	if err == nil || !strings.Contains(err.Error(), "E2B_API_KEY") || strings.Contains(err.Error(), "e2b_wrong_key") {
		t.Errorf("bad key: %v", err)
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "E2B_API_KEY") {
		t.Errorf("no key: %v", err)
	}
}

func TestUnknownTemplate(t *testing.T) {
	e := newEnv(t)
	tpl := "no-such-template"
	e.spec.Settings = &Settings{Template: &tpl}
	_, err := e.p.Create(context.Background(), e.spec)
	if err == nil || !strings.Contains(err.Error(), "no-such-template") || !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("unknown template: %v", err)
	}
	if ids := e.fake.IDs(); len(ids) != 0 {
		t.Errorf("left %v", ids)
	}
}

func TestAccounts(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the fake runs commands as manifest users only as root")
	}
	e := newEnv(t)
	e.spec.Accounts = sandbox.Accounts{Users: []sandbox.User{{Name: "alice", UID: 2001}, {Name: "bob", UID: 2002}}, Groups: []sandbox.Group{{Name: "dev", GID: 3000, Users: []string{"alice"}}}}
	w := e.create(t)
	res, err := w.Exec(context.Background(), sandbox.ExecRequest{Shell: "id -u; id -G", User: "alice"})
	if err != nil || string(res.Stdout) != "2001\n2001 3000\n" {
		t.Errorf("exec as alice: %q %q, %v", res.Stdout, res.Stderr, err)
	}
	res, err = w.Exec(context.Background(), sandbox.ExecRequest{Shell: "touch mine && stat -c %u mine", User: "alice"})
	if err != nil || string(res.Stdout) != "2001\n" {
		t.Errorf("alice writing in the workspace: %q %q, %v", res.Stdout, res.Stderr, err)
	}
	// The workspace is sticky: bob cannot remove or change alice's file.
	res, err = w.Exec(context.Background(), sandbox.ExecRequest{Shell: "rm -f mine; echo x >> mine", User: "bob"})
	if err != nil || res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "denied") {
		t.Errorf("bob changing alice's file: %+v, %v", res, err)
	}
}

func TestCommitSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	on := true
	e.spec.Settings = &Settings{Commit: &on}
	w := e.create(t)
	if err := w.WriteFile(ctx, "kept.txt", []byte("from the snapshot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := sandbox.SnapshotImageRef(e.spec.Lineage, e.spec.Address)
	if _, err := e.p.ImageID(ctx, ref); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("a snapshot before any commit: %v", err)
	}
	id, err := w.Commit(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.p.ImageID(ctx, ref); err != nil || got != id {
		t.Errorf("ImageID = %q, %v; want the committed %q", got, err, id)
	}
	if err := w.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	// The engine restores into a sandbox created from the snapshot.
	restored := e.spec
	restored.Image = ref
	sb, err := e.p.Create(ctx, restored)
	if err != nil {
		t.Fatal(err)
	}
	if tpl := e.fake.Created(sb.ID())["templateID"]; tpl == "base" || !strings.HasPrefix(tpl.(string), "agentctl-snapshot-") {
		t.Errorf("the restored sandbox came from template %v", tpl)
	}
	if b, err := sb.ReadFile(ctx, "kept.txt", 0); err != nil || string(b) != "from the snapshot\n" {
		t.Errorf("a file of the snapshot in the restored sandbox: %q, %v", b, err)
	}
	if err := e.p.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.ImageID(ctx, ref); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("after RemoveImage: %v", err)
	}
	if err := e.p.RemoveImage(ctx, ref); err != nil {
		t.Errorf("removing a removed snapshot: %v", err)
	}
	// Without the setting nothing is committed.
	e.spec.Address, e.spec.Settings = "sandbox.plain", &Settings{}
	w = e.create(t)
	if _, err := w.Commit(ctx, ref); err == nil || !strings.Contains(err.Error(), "commit_snapshot = true") {
		t.Errorf("commit without commit_snapshot: %v", err)
	}
	e.spec.Image = "python:3.12"
	if _, err := e.p.Create(ctx, e.spec); err == nil || !strings.Contains(err.Error(), "templates, not images") {
		t.Errorf("create from an image: %v", err)
	}
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	e.p.client.sleep = sleepCtx // really wait for Retry-After
	e.fake.SetRateLimit(3, time.Second)
	start := time.Now()
	for i := 0; i < 6; i++ {
		if _, err := w.Refresh(context.Background()); err != nil {
			t.Fatalf("refresh %d under the rate limit: %v", i, err)
		}
	}
	if e.fake.RateLimited() == 0 {
		t.Error("the rate limit refused nothing")
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("six requests at three a second took %s: Retry-After was not honoured", d)
	}
}
