package e2b

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/providers/e2b/e2bfake"
	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/sandbox"
)

// env is a provider talking to a fresh fake, and the spec of the
// sandbox a test creates.
type env struct {
	fake  *e2bfake.Server
	p     *Provider
	spec  sandbox.Spec
	waits *waits
}

// waits records the client's waits between retries instead of sleeping
// them.
type waits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, d)
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

func newEnv(t testing.TB) env {
	t.Helper()
	f := e2bfake.New(t)
	p, err := New(Options{Environ: []string{"E2B_API_KEY=" + f.APIKey, "E2B_DOMAIN=" + e2bfake.Domain}, HTTPClient: f.Client(), TempDir: f.Root + "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	w := &waits{}
	p.client.sleep = w.sleep
	spec := sandbox.Spec{Address: `sandbox.review["pricing"]`, Lineage: "lin-1", Root: f.Root + "/workspace", Ports: []int{8080},
		Network: "none", Settings: &Settings{Metadata: map[string]string{"team": "data"}, Env: map[string]string{"GREETING": "hello"}, Timeout: 10 * time.Minute}}
	return env{fake: f, p: p, spec: spec, waits: w}
}

// create makes a sandbox of e.spec, killed when t ends.
func (e env) create(t testing.TB) *Workspace {
	t.Helper()
	sb, err := e.p.Create(context.Background(), e.spec)
	if err != nil {
		t.Fatalf("creating %s: %v", e.spec.Address, err)
	}
	t.Cleanup(func() {
		if err := sb.Delete(context.Background()); err != nil {
			t.Errorf("killing %s after the test: %v", e.spec.Address, err)
		}
	})
	return sb.(*Workspace)
}

// TestCreateRequestAndPause: what agentctl asks E2B for (metadata with
// agentctl's labels, the timeout, the template, the network, the
// environment), and Stop and Start as E2B's pause and resume. The
// contract itself is the suite's (TestSandboxContract).
func TestCreateRequestAndPause(t *testing.T) {
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
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if e.fake.State(w.ID()) != "paused" {
		t.Fatalf("state after stop = %q, want paused", e.fake.State(w.ID()))
	}
	if err := w.Stop(ctx); err != nil {
		t.Errorf("pausing a paused sandbox: %v", err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if e.fake.State(w.ID()) != "running" {
		t.Fatalf("state after start = %q, want running", e.fake.State(w.ID()))
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

// TestPortURL: E2B serves port P at https://P-<sandbox id>.<domain>
// (the suite fetches it); a port the sandbox does not expose has none.
func TestPortURL(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	u, err := w.PortURL(context.Background(), 8080)
	if want := "https://8080-" + w.ID() + "." + e2bfake.Domain; err != nil || u != want {
		t.Errorf("url = %s, %v; want %s", u, err, want)
	}
	if _, err := w.PortURL(context.Background(), 9); err == nil || !strings.Contains(err.Error(), "not exposed") {
		t.Errorf("unexposed port: %v", err)
	}
}

// TestTransfersLeaveNoFiles: the files a transfer stages in the
// sandbox's temporary directory (Options.TempDir) are removed after it.
func TestTransfersLeaveNoFiles(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	if err := w.WriteFile(ctx, "a/run.sh", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rc, err := w.CopyOut(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CopyIn(ctx, "copy", bytes.NewReader(tarball)); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(e.fake.Root + "/tmp/agentctl-*"); len(m) > 0 {
		t.Errorf("transfer files left behind: %v", m)
	}
}

// TestFailedCreateLeavesNothing: a create whose answer is lost after E2B
// made the sandbox, or whose workspace root cannot be made, kills the
// sandbox rather than leaving it running untracked.
func TestFailedCreateLeavesNothing(t *testing.T) {
	e := newEnv(t)
	// The answer to a create is lost after E2B created the sandbox: it is
	// killed, not left running untracked.
	e.fake.Fail(e2bfake.Fault{Method: "POST", PathContains: "/sandboxes", Status: 500, Count: 1, After: true})
	third := e.spec
	third.Address = "sandbox.third"
	if _, err := e.p.Create(context.Background(), third); err == nil || !strings.Contains(err.Error(), "HTTP 500") {
		t.Fatalf("create with a lost answer: %v", err)
	}
	if ids := e.fake.IDs(); len(ids) != 0 {
		t.Errorf("a failed create left a sandbox: %v", ids)
	}
	// A workspace root the template's user cannot create kills the
	// sandbox it made.
	bad := e.spec
	bad.Address, bad.Root = "sandbox.bad", "/proc/agentctl-cannot"
	if _, err := e.p.Create(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "workspace root") {
		t.Fatalf("create with a bad root: %v", err)
	}
	if ids := e.fake.IDs(); len(ids) != 0 {
		t.Errorf("a create whose root failed left a sandbox: %v", ids)
	}
}

func TestRetries(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	e.fake.Fail(e2bfake.Fault{Method: "GET", PathContains: "/sandboxes/", Status: 429, RetryAfter: "7", Count: 2})
	if _, err := w.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.waits.all(); len(got) != 2 || got[0] != 7*time.Second {
		t.Errorf("waits = %v, want two of 7s (Retry-After)", got)
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
	e.p.client.sleep = hosted.Sleep // really wait for Retry-After
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
