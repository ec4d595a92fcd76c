package daytona

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/internal/fakedaytona"
	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/providers/registry/registrytest"
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
		return hosted.Sleep(ctx, min(d, 5*time.Millisecond))
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

// What a create asks Daytona for, and an archived sandbox started again
// (sandboxtest checks stop, start, reopen and delete).
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
	// The session state names the sandbox, never the key.
	if string(w.Session().Data) == "" || strings.Contains(string(w.Session().Data), e.fake.APIKey) {
		t.Fatalf("session state %+v", w.Session())
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

// A sandbox whose build failed and that cannot be deleted either is
// reported, not left running silently.
func TestBuildFailedAndUndeletableIsReported(t *testing.T) {
	e := newEnv(t)
	e.spec.Image = "fail/nope:1"
	e.fake.Fail(fakedaytona.Fault{Method: "DELETE", PathContains: "/api/sandbox/", Status: 400, Count: 10})
	_, err := e.p.Create(context.Background(), e.spec)
	if err == nil || !strings.Contains(err.Error(), "build failed") || !strings.Contains(err.Error(), "deleting the sandbox (id ") ||
		!strings.Contains(err.Error(), "also failed") || !strings.Contains(err.Error(), "Daytona dashboard") {
		t.Fatalf("err = %v", err)
	}
}

// decodeSettings decodes src as a sandbox body's arguments with the
// common arguments in args.
func decodeSettings(t *testing.T, src string, args registry.SandboxArgs) (*Settings, error) {
	return registrytest.Sandbox[*Settings](t, DecodeSandbox, src, args)
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
