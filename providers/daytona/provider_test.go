package daytona

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/agentctl/agentctl/internal/fakedaytona"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

type env struct {
	fake   *fakedaytona.Server
	p      *Provider
	spec   sandbox.Spec
	sleeps *[]time.Duration
}

func newEnv(t testing.TB) env {
	t.Helper()
	f := fakedaytona.New(t)
	f.PollsToSettle = 2
	p, err := New(Options{Environ: []string{"DAYTONA_API_KEY=" + f.APIKey, "DAYTONA_API_URL=" + f.URL},
		PollInterval: time.Millisecond, TempDir: f.Root + "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sleeps := &[]time.Duration{}
	p.client.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*sleeps = append(*sleeps, d)
		mu.Unlock()
		// Retry waits are recorded, not slept; polls sleep briefly so real
		// commands can progress.
		return sleepCtx(ctx, min(d, 5*time.Millisecond))
	}
	spec := sandbox.Spec{Address: `sandbox.review["pricing"]`, Lineage: "lin-1", Root: f.Root + "/workspace", Ports: []int{8080},
		Image: "python:3.12-slim", Settings: &Settings{Labels: map[string]string{"team": "data"}, AutoStopInterval: ptr(30)}}
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
	if got := e.fake.State(w.ID()); got != "started" {
		t.Fatalf("state after create = %q, want started", got)
	}
	body := e.fake.Created(w.ID())
	if bi, _ := body["buildInfo"].(map[string]any); bi["dockerfileContent"] != "FROM python:3.12-slim" {
		t.Errorf("image did not become a FROM build: %v", body["buildInfo"])
	}
	if body["autoStopInterval"] != float64(30) {
		t.Errorf("autoStopInterval = %v", body["autoStopInterval"])
	}
	labels := e.fake.Labels(w.ID())
	for k, v := range map[string]string{sandbox.LabelManaged: "true", sandbox.LabelLineage: "lin-1", sandbox.LabelAddress: `sandbox.review["pricing"]`, "team": "data"} {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}
	if st, err := w.Refresh(ctx); err != nil || st != sandbox.StatusRunning {
		t.Fatalf("Refresh = %v, %v", st, err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := w.Refresh(ctx); st != sandbox.StatusStopped {
		t.Fatalf("after stop: %v", st)
	}
	// An archived sandbox is started again by the next apply.
	e.fake.SetState(w.ID(), "archived", "")
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.State(w.ID()); got != "started" {
		t.Fatalf("after start: %q", got)
	}
	// Resume by id.
	w2, err := e.p.Open(ctx, e.spec, w.Session())
	if err != nil {
		t.Fatal(err)
	}
	if w2.ID() != w.ID() || string(w.Session().Data) == "" || strings.Contains(string(w.Session().Data), e.fake.APIKey) {
		t.Fatalf("session state %+v", w.Session())
	}
	if err := w2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := w.Refresh(ctx); err != nil || st != sandbox.StatusMissing {
		t.Fatalf("after delete: %v %v", st, err)
	}
	if err := w.Delete(ctx); err != nil {
		t.Fatalf("deleting a missing sandbox: %v", err)
	}
	if _, err := e.p.Open(ctx, e.spec, w.Session()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Open of deleted sandbox: %v", err)
	}
}

func TestBuildFailedFailsFast(t *testing.T) {
	e := newEnv(t)
	e.spec.Image = "fail/nope:1"
	_, err := e.p.Create(context.Background(), e.spec)
	if err == nil || !strings.Contains(err.Error(), "failed to pull image") || !strings.Contains(err.Error(), "build failed") {
		t.Fatalf("err = %v", err)
	}
	if len(e.fake.IDs()) != 0 && e.fake.State(e.fake.IDs()[0]) != "destroying" {
		t.Errorf("failed sandbox left behind: %v", e.fake.IDs())
	}
}

// decodeSettings decodes src as a sandbox body's daytona arguments with
// the common arguments in args.
func decodeSettings(t *testing.T, src string, args registry.SandboxArgs) (*Settings, error) {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "main.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	args.Address, args.Body = "sandbox.a", f.Body
	st, diags := DecodeSandbox(&args)
	if diags.HasErrors() {
		return nil, diags
	}
	return st.(*Settings), nil
}

func TestSettingsValidation(t *testing.T) {
	res := hcl.Range{Filename: "main.hcl"}
	if _, err := decodeSettings(t, `snapshot = "snap"`, registry.SandboxArgs{Resources: sandbox.Resources{CPUs: 2}, ResourcesRange: &res,
		ResourceRanges: map[string]hcl.Range{"cpus": res}}); err == nil || !strings.Contains(err.Error(), "resources cannot be combined with snapshot") {
		t.Fatalf("err = %v", err)
	}
	if _, err := decodeSettings(t, `snapshott = "x"`, registry.SandboxArgs{}); err == nil || !strings.Contains(err.Error(), `"snapshott" is not expected`) {
		t.Fatalf("err = %v", err)
	}
	st, err := decodeSettings(t, `
create_timeout = "90s"
start_timeout = "30s"
env = { A = "b" }
network_block_all = true`, registry.SandboxArgs{})
	if err != nil || st.createTimeout() != 90*time.Second || st.startTimeout() != 30*time.Second || st.Env["A"] != "b" || !flag(st.NetworkBlockAll) {
		t.Fatalf("%+v %v", st, err)
	}
	st, err = decodeSettings(t, `
auto_stop_interval = 30
labels = { team = "data" }
network_allow_list = ["10.0.0.0/8", "192.168.1.0/24"]`, registry.SandboxArgs{})
	if err != nil || st.createTimeout() != 5*time.Minute || st.startTimeout() != 2*time.Minute || *st.AutoStopInterval != 30 ||
		st.Labels["team"] != "data" || st.allowList() != "10.0.0.0/8,192.168.1.0/24" {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := decodeSettings(t, ``, registry.SandboxArgs{Resources: sandbox.Resources{CPUs: 2}, ResourcesRange: &res,
		ResourceRanges: map[string]hcl.Range{"cpus": res}}); err == nil || !strings.Contains(err.Error(), "resources need an image") {
		t.Fatalf("err = %v", err)
	}
	if _, err := decodeSettings(t, `network_allow_list = ["10.0.0.0/33"]`, registry.SandboxArgs{}); err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33" is not a CIDR`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := decodeSettings(t, ``, registry.SandboxArgs{Ports: []int{80}}); err == nil || !strings.Contains(err.Error(), "ports 3000 to 9999") {
		t.Fatalf("err = %v", err)
	}
}

func TestExec(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	cases := []struct {
		name             string
		req              sandbox.ExecRequest
		code             int
		stdout, stderr   string
		timedOut, viaSes bool
	}{
		{name: "short", req: sandbox.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Timeout: 10 * time.Second}, code: 3, stdout: "out\n", stderr: "err\n"},
		{name: "quotes", req: sandbox.ExecRequest{Argv: []string{"printf", "%s|", "it's", `"q"`, "a b", "ü"}, Timeout: 10 * time.Second}, stdout: `it's|"q"|a b|ü|`},
		{name: "env+workdir", req: sandbox.ExecRequest{Shell: `mkdir -p sub && cd sub && echo "$FOO" && pwd`, Env: map[string]string{"FOO": "bar baz"}, Timeout: 10 * time.Second}, stdout: "bar baz\n" + e.spec.Root + "/sub\n"},
		{name: "stdin", req: sandbox.ExecRequest{Shell: "cat; echo", Stdin: strings.NewReader(`{"sql":"select 1"}`), Timeout: 10 * time.Second}, stdout: "{\"sql\":\"select 1\"}\n"},
		{name: "long", req: sandbox.ExecRequest{Shell: "sleep 0.2; echo done; echo warn >&2; exit 7"}, code: 7, stdout: "done\n", stderr: "warn\n", viaSes: true},
		{name: "long stdin", req: sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("hello")}, stdout: "hello", viaSes: true},
		{name: "short timeout", req: sandbox.ExecRequest{Shell: "echo started; sleep 30", Timeout: 1 * time.Second}, code: -1, timedOut: true},
		{name: "long timeout", req: sandbox.ExecRequest{Shell: "echo started; sleep 30", Timeout: 90 * time.Second}, code: -1, timedOut: true, viaSes: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.fake.Requests())
			if tc.name == "long timeout" {
				// Shrink the timeout below the short threshold without
				// leaving the session path.
				w.p.shortExec = 10 * time.Millisecond
				tc.req.Timeout = 1 * time.Second
				defer func() { w.p.shortExec = DefaultShortExec }()
			}
			res, err := w.Exec(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.code || res.TimedOut != tc.timedOut {
				t.Fatalf("code %d timedOut %v, want %d %v (stdout %q stderr %q)", res.ExitCode, res.TimedOut, tc.code, tc.timedOut, res.Stdout, res.Stderr)
			}
			if !tc.timedOut && (string(res.Stdout) != tc.stdout || string(res.Stderr) != tc.stderr) {
				t.Fatalf("stdout %q stderr %q, want %q %q", res.Stdout, res.Stderr, tc.stdout, tc.stderr)
			}
			if tc.timedOut && tc.viaSes && !strings.Contains(string(res.Stdout), "started") {
				t.Errorf("output before the timeout was lost: %q", res.Stdout)
			}
			reqs := strings.Join(e.fake.Requests()[before:], "\n")
			if got := strings.Contains(reqs, "/process/session"); got != tc.viaSes {
				t.Errorf("session path used = %v, want %v:\n%s", got, tc.viaSes, reqs)
			}
			if tc.viaSes && !strings.Contains(reqs, "DELETE /toolbox/"+w.ID()+"/process/session/") {
				t.Errorf("session not deleted:\n%s", reqs)
			}
		})
	}
}

func TestExecOutputLimit(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	res, err := w.Exec(context.Background(), sandbox.ExecRequest{Shell: "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done", Timeout: 20 * time.Second, OutputLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.OriginalStdout < 10000 || !strings.HasPrefix(string(res.Stdout), "line0\n") || !strings.HasSuffix(string(res.Stdout), "line1999\n") {
		t.Fatalf("truncated=%v original=%d stdout=%q", res.Truncated, res.OriginalStdout, res.Stdout)
	}
}

func TestFilesRoundTrip(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	names := []string{"plain.txt", "with space.md", "ünïcødé/файл.txt", `quote's "double".txt`, "deep/a/b/c.bin"}
	for i, n := range names {
		data := []byte(strings.Repeat(n, i+1))
		if err := w.WriteFile(ctx, n, data, 0o600); err != nil {
			t.Fatalf("write %q: %v", n, err)
		}
		got, err := w.ReadFile(ctx, n, 0)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %q = %q, %v", n, got, err)
		}
		fi, err := w.Stat(ctx, n)
		if err != nil || fi.Size != int64(len(data)) || fi.Mode.Perm() != 0o600 || fi.Path != n {
			t.Fatalf("stat %q = %+v, %v", n, fi, err)
		}
	}
	if _, err := w.ReadFile(ctx, "plain.txt", 3); err == nil || !strings.Contains(err.Error(), "larger than 3 bytes") {
		t.Fatalf("limit: %v", err)
	}
	ents, err := w.ReadDir(ctx, "ünïcødé")
	if err != nil || len(ents) != 1 || ents[0].Path != "ünïcødé/файл.txt" {
		t.Fatalf("readdir = %+v, %v", ents, err)
	}
	if err := w.Mkdir(ctx, "empty dir/x"); err != nil {
		t.Fatal(err)
	}
	if fi, err := w.Stat(ctx, "empty dir/x"); err != nil || !fi.Mode.IsDir() {
		t.Fatalf("%+v %v", fi, err)
	}
	if err := w.Remove(ctx, "with space.md"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Stat(ctx, "with space.md"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after remove: %v", err)
	}

	// CopyOut then CopyIn into a fresh sandbox: a snapshot round trip.
	rc, err := w.CopyOut(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	members := tarNames(t, snap)
	for _, want := range []string{"plain.txt", "ünïcødé/файл.txt", `quote's "double".txt`, "deep/a/b/c.bin"} {
		if !members[want] {
			t.Errorf("snapshot lacks %q: %v", want, members)
		}
	}
	if err := w.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := w.Refresh(ctx); st != sandbox.StatusMissing {
		t.Fatalf("refresh after delete = %v", st)
	}
	// Recreate + restore.
	w2 := e.create(t)
	if _, err := w2.ReadFile(ctx, "plain.txt", 0); err == nil {
		t.Fatal("new sandbox is not empty")
	}
	if err := w2.CopyIn(ctx, ".", bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	got, err := w2.ReadFile(ctx, `quote's "double".txt`, 0)
	if err != nil || string(got) != strings.Repeat(`quote's "double".txt`, 4) {
		t.Fatalf("restored = %q, %v", got, err)
	}
	if fi, err := w2.Stat(ctx, "deep/a/b/c.bin"); err != nil || fi.Mode.Perm() != 0o600 {
		t.Fatalf("restored mode: %+v %v", fi, err)
	}
}

func tarNames(t *testing.T, b []byte) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Name, "./") || strings.HasPrefix(h.Name, "/") {
			t.Errorf("member %q is not relative", h.Name)
		}
		out[strings.TrimSuffix(h.Name, "/")] = true
	}
}

func TestPathPolicy(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	outside := filepath.Join(e.fake.Root, "outside")
	if _, err := w.Exec(ctx, sandbox.ExecRequest{Shell: "mkdir -p " + sandbox.ShellQuote(outside) + " && echo secret > " + sandbox.ShellQuote(outside+"/s") + " && ln -s " + sandbox.ShellQuote(outside) + " escape && ln -s " + sandbox.ShellQuote(outside+"/s") + " file-link && mkdir in && ln -s in inner-link && echo ok > in/f", Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../x", "/etc/passwd", "a/../../x", "escape/s", "file-link", "escape"} {
		if _, err := w.ReadFile(ctx, p, 0); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("ReadFile(%q) = %v, want ErrPathEscape", p, err)
		}
	}
	if err := w.WriteFile(ctx, "escape/new", []byte("x"), 0); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("WriteFile through symlink: %v", err)
	}
	if err := w.CopyIn(ctx, "escape", bytes.NewReader(nil)); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("CopyIn through symlink: %v", err)
	}
	// Stat does not follow the final link, so it may describe it.
	if fi, err := w.Stat(ctx, "escape"); err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != outside {
		t.Errorf("Stat(escape) = %+v, %v", fi, err)
	}
	if got, err := w.ReadFile(ctx, "inner-link/f", 0); err != nil || string(got) != "ok\n" {
		t.Errorf("link inside the workspace: %q %v", got, err)
	}
	// Hostile archives.
	for name, build := range map[string]func(*tar.Writer){
		"dotdot": func(tw *tar.Writer) { tw.WriteHeader(&tar.Header{Name: "../x", Typeflag: tar.TypeReg}) },
		"abs":    func(tw *tar.Writer) { tw.WriteHeader(&tar.Header{Name: "/etc/x", Typeflag: tar.TypeReg}) },
		"hardlink": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"})
		},
		"through-symlink-out": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../../.."})
			tw.WriteHeader(&tar.Header{Name: "l/x", Typeflag: tar.TypeReg})
		},
		"dir-over-symlink-out": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"})
			tw.WriteHeader(&tar.Header{Name: "l/", Typeflag: tar.TypeDir})
		},
		"beneath-link": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "in"})
			tw.WriteHeader(&tar.Header{Name: "l/x", Typeflag: tar.TypeReg})
		},
		"fifo": func(tw *tar.Writer) { tw.WriteHeader(&tar.Header{Name: "p", Typeflag: tar.TypeFifo}) },
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		build(tw)
		tw.Close()
		if err := w.CopyIn(ctx, ".", &buf); err == nil {
			t.Errorf("hostile archive %s accepted", name)
		}
	}
	if _, err := w.ReadFile(ctx, "../outside/s", 0); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("lexical escape: %v", err)
	}
	// Links whose target leaves the workspace are kept as links.
	var links bytes.Buffer
	tw := tar.NewWriter(&links)
	tw.WriteHeader(&tar.Header{Name: "venv/bin/python", Typeflag: tar.TypeSymlink, Linkname: "/usr/bin/python3"})
	tw.WriteHeader(&tar.Header{Name: "venv/up", Typeflag: tar.TypeSymlink, Linkname: "../../outside"})
	tw.Close()
	if err := w.CopyIn(ctx, "kept", &links); err != nil {
		t.Fatalf("CopyIn of links leaving the workspace: %v", err)
	}
	for p, want := range map[string]string{"kept/venv/bin/python": "/usr/bin/python3", "kept/venv/up": "../../outside"} {
		if fi, err := w.Stat(ctx, p); err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != want {
			t.Errorf("%s: %+v, %v; want a link to %s", p, fi, err, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "s")); err != nil || string(b) != "secret\n" {
		t.Errorf("file outside the workspace changed: %q, %v", b, err)
	}
}

func TestPortURL(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	u, err := w.PortURL(context.Background(), 8080)
	if err != nil || !strings.HasPrefix(u, "https://8080-") {
		t.Fatalf("%q %v", u, err)
	}
	l, _ := w.SignedPortURL(context.Background(), 8080)
	if time.Until(l.ExpiresAt) < 59*time.Minute {
		t.Errorf("expiry %v", l.ExpiresAt)
	}
	if _, err := w.PortURL(context.Background(), 9000); err == nil || !strings.Contains(err.Error(), "not exposed") {
		t.Fatalf("unexposed port: %v", err)
	}
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		status     int
		retryAfter string
		count      int
		wantErr    string // "" = succeeds after retries
		waits      []time.Duration
	}{
		{status: 401, count: 1, wantErr: "DAYTONA_API_KEY"},
		{status: 403, count: 1, wantErr: "access denied (HTTP 403"},
		{status: 404, count: 1, wantErr: "not found (HTTP 404"},
		{status: 409, count: 1, wantErr: "conflict (HTTP 409"},
		{status: 429, retryAfter: "7", count: 2, waits: []time.Duration{7 * time.Second, 7 * time.Second}},
		{status: 429, retryAfter: "1", count: 10, wantErr: "rate limited by Daytona (HTTP 429 after 5 attempts"},
		{status: 503, count: 2},
		{status: 500, count: 10, wantErr: "Daytona server error (HTTP 500 after 5 attempts"},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status)+tc.retryAfter, func(t *testing.T) {
			e := newEnv(t)
			w := e.create(t)
			*e.sleeps = nil
			e.fake.Fail(fakedaytona.Fault{Method: "GET", PathContains: "/api/sandbox/", Status: tc.status, RetryAfter: tc.retryAfter, Count: tc.count})
			_, err := w.Refresh(context.Background())
			if tc.status == 404 {
				// Refresh turns 404 into missing; check the message on Start.
				e.fake.Fail(fakedaytona.Fault{Method: "GET", PathContains: "/api/sandbox/", Status: 404, Count: 1})
				err = w.Start(context.Background())
				if !errors.Is(err, sandbox.ErrNotFound) {
					t.Errorf("404 does not wrap ErrNotFound: %v", err)
				}
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("not retried: %v", err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				for _, part := range []string{`sandbox.review["pricing"]`, "get sandbox"} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("message lacks %q: %v", part, err)
					}
				}
				if strings.Contains(err.Error(), e.fake.APIKey) {
					t.Errorf("message leaks the key: %v", err)
				}
			}
			if tc.waits != nil {
				if len(*e.sleeps) < len(tc.waits) {
					t.Fatalf("waits %v, want %v", *e.sleeps, tc.waits)
				}
				for i, d := range tc.waits {
					if (*e.sleeps)[i] != d {
						t.Errorf("wait %d = %v, want Retry-After %v", i, (*e.sleeps)[i], d)
					}
				}
			}
		})
	}
}

func TestBadKey(t *testing.T) {
	f := fakedaytona.New(t)
	p, err := New(Options{APIKey: "wrong-key-123456", APIURL: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Create(context.Background(), sandbox.Spec{Address: "sandbox.a", Root: f.Root + "/w"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "sandbox.a") || strings.Contains(err.Error(), "wrong-key-123456") {
		t.Fatalf("err = %v", err)
	}
	if _, err := New(Options{Environ: []string{"DAYTONA_JWT_TOKEN=x"}}); err == nil || !strings.Contains(err.Error(), "DAYTONA_ORGANIZATION_ID") {
		t.Fatalf("jwt without org: %v", err)
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "DAYTONA_API_KEY") {
		t.Fatalf("no key: %v", err)
	}
}

func TestList(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	got, err := e.p.Client().List(context.Background(), map[string]string{sandbox.LabelLineage: "lin-1"})
	if err != nil || len(got) != 1 || got[0].ID != w.ID() {
		t.Fatalf("%v %v", got, err)
	}
	ids := []string{}
	for _, s := range got {
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
}

// A sandbox left behind by an interrupted create (same lineage and
// address) is deleted by the next Create; others are left alone.
func TestCreateRemovesLeftovers(t *testing.T) {
	e := newEnv(t)
	first := e.create(t)
	other := e.spec
	other.Lineage = "lin-2"
	ow, err := e.p.Create(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	second := e.create(t)
	ids := e.fake.IDs()
	if len(ids) != 2 || !slices.Contains(ids, ow.ID()) || !slices.Contains(ids, second.ID()) || slices.Contains(ids, first.ID()) {
		t.Fatalf("live sandboxes %v; want %s (other lineage) and %s, not the leftover %s", ids, ow.ID(), second.ID(), first.ID())
	}
}

// Without a root in the manifest the workspace is DefaultRoot. The fake,
// like Daytona's default snapshot, runs as the user daytona, who may not
// create it there (outside the fake's Root): the create fails, says where
// the user may create it (the toolbox's user-home-dir), and leaves no
// sandbox behind, since the engine records only sandboxes whose create
// succeeded.
func TestCreateRootRefusedDeletesSandbox(t *testing.T) {
	e := newEnv(t)
	spec := e.spec
	spec.Root = ""
	_, err := e.p.Create(context.Background(), spec)
	if err == nil {
		t.Fatal("create succeeded outside the fake's root")
	}
	for _, want := range []string{"creating the workspace root " + DefaultRoot, "permission denied",
		"home directory " + e.fake.Home, `set root = "` + e.fake.Home + `/workspace" in the manifest`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if ids := e.fake.IDs(); len(ids) != 0 {
		t.Errorf("live sandboxes after the failed create: %v", ids)
	}
}

// A workspace root in the user's home directory is created.
func TestCreateRootInHome(t *testing.T) {
	e := newEnv(t)
	e.spec.Root = e.fake.Home + "/workspace"
	w := e.create(t)
	if fi, err := os.Stat(e.spec.Root); err != nil || !fi.IsDir() {
		t.Fatalf("workspace root %s: %v", e.spec.Root, err)
	}
	if ids := e.fake.IDs(); len(ids) != 1 || ids[0] != w.ID() {
		t.Fatalf("live sandboxes %v", ids)
	}
}

// Any failure creating the root after the sandbox started deletes it.
func TestCreateRootFaultDeletesSandbox(t *testing.T) {
	e := newEnv(t)
	e.fake.Fail(fakedaytona.Fault{Method: "POST", PathContains: "/files/folder", Status: 400, Count: 1})
	_, err := e.p.Create(context.Background(), e.spec)
	if err == nil || !strings.Contains(err.Error(), "creating the workspace root") {
		t.Fatalf("err = %v", err)
	}
	if ids := e.fake.IDs(); len(ids) != 0 {
		t.Errorf("live sandboxes after the failed create: %v", ids)
	}
}

func ptr[T any](v T) *T { return &v }
