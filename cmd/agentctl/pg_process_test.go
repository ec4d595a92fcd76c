package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/pgtest"
	"github.com/agentctl/agentctl/state/local"
	"github.com/agentctl/agentctl/state/pgstore"
)

// Process tests of the pg backend: real agentctl processes in working
// directories that share one PostgreSQL backend (a private cluster,
// internal/pgtest).

// pg is the cluster these tests share, stopped after them.
var pg pgtest.Shared

// stopPG runs the tests, then stops the cluster if one was started.
type stopPG struct{ m *testing.M }

func (s stopPG) Run() int {
	code := s.m.Run()
	if err := pg.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

var pgSchemaSeq atomic.Int64

// pgBackend returns the agentctl block of a configuration using a new
// schema of the test cluster, the conn string coming from the
// environment (AGENTCTL_TEST_PG, set here) as users are told to, and a
// store the test reads the backend through.
func pgBackend(t *testing.T) (block string, store func(dir string) *pgstore.Store) {
	t.Helper()
	srv := pg.Server(t)
	t.Setenv("AGENTCTL_TEST_PG", srv.ConnString)
	schema := fmt.Sprintf("p%d_%d", os.Getpid(), pgSchemaSeq.Add(1))
	block = fmt.Sprintf("agentctl {\n  backend \"pg\" {\n    conn_str    = env(\"AGENTCTL_TEST_PG\")\n    schema_name = %q\n  }\n}\n", schema)
	return block, func(dir string) *pgstore.Store {
		t.Helper()
		d, err := local.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		s, err := pgstore.Open(context.Background(), pgstore.Config{ConnString: srv.ConnString, Schema: schema, Version: config.Version, Local: d})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
}

// pgHarness is a working directory whose configuration uses the backend.
func pgHarness(t *testing.T, block string) *harness {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(block+pipelineConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// localWorkspace is the workspace of the sandbox made in h's directory
// ("" when there is none).
func localWorkspace(h *harness) string {
	m, _ := filepath.Glob(filepath.Join(h.stateDir(), "sandboxes", "*", "workspace"))
	if len(m) != 1 {
		return ""
	}
	return m[0]
}

func lastLoggedStep(ws string) int {
	b, err := os.ReadFile(filepath.Join(ws, "log.txt"))
	if err != nil {
		return 0
	}
	lines := strings.Fields(strings.ReplaceAll(string(b), "step ", ""))
	if len(lines) == 0 {
		return 0
	}
	var n int
	fmt.Sscan(lines[len(lines)-1], &n)
	return n
}

// journalOf returns the checkpointed steps of run.job in the backend.
func journalOf(t *testing.T, s *pgstore.Store) []agentloop.Step {
	t.Helper()
	st, err := s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := st.Runs["run.job"]
	if r == nil {
		return nil
	}
	var steps []agentloop.Step
	if _, err := s.ReadJournal(context.Background(), r.Journal, func(raw json.RawMessage) error {
		var s agentloop.Step
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		steps = append(steps, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return steps
}

// checkOneOfEach checks that the journal holds each tool result once:
// no committed step was lost or repeated.
func checkOneOfEach(t *testing.T, steps []agentloop.Step) {
	t.Helper()
	seen := map[string]int{}
	for _, s := range steps {
		if s.Kind == agentloop.StepTool {
			for _, id := range toolCallIDs(s) {
				seen[id]++
			}
		}
	}
	if got := countKind(steps, agentloop.StepTool); got != pipelineSteps {
		t.Errorf("journal holds %d tool results, want %d", got, pipelineSteps)
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("tool call %s has %d results in the journal", id, n)
		}
	}
}

func toolCallIDs(s agentloop.Step) []string {
	b, _ := json.Marshal(s)
	var m map[string]any
	json.Unmarshal(b, &m)
	var ids []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if id, ok := v["call_id"].(string); ok {
				ids = append(ids, id)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(m)
	return ids
}

// TestPGTwoWorkingDirectories: two working directories, one
// configuration, one backend. An apply is killed with SIGKILL in one
// (a concurrent apply in the other fails at once, naming the lock and
// its holder), then resumed in the other; both list the same state and
// neither writes a local state file.
func TestPGTwoWorkingDirectories(t *testing.T) {
	block, open := pgBackend(t)
	a, b := pgHarness(t, block), pgHarness(t, block)

	_, errOut, code := b.run("plan", "-no-color")
	if code == 0 || !strings.Contains(errOut, "Backend initialization required") || !strings.Contains(errOut, "agentctl init") {
		t.Fatalf("plan before init: exit %d\n%s", code, errOut)
	}
	out := a.mustRun("init", "-no-color")
	if !strings.Contains(out, "Created the backend's tables") || strings.Contains(out, os.Getenv("AGENTCTL_TEST_PG")) {
		t.Fatalf("init:\n%s", out)
	}
	if out := b.mustRun("init", "-no-color"); !strings.Contains(out, "up to date") {
		t.Fatalf("second init:\n%s", out)
	}

	p := a.start("apply", "-auto-approve", "-no-color")
	a.waitUntil("the workspace", func() bool { return localWorkspace(a) != "" })
	ws := localWorkspace(a)
	if err := os.WriteFile(filepath.Join(ws, "hold"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.waitUntil("step 12 to start", func() bool { return lastLoggedStep(ws) == holdStep })

	start := time.Now()
	_, errOut, code = b.run("apply", "-auto-approve", "-no-color")
	if code == 0 || !strings.Contains(errOut, "The state is locked by another agentctl") || !strings.Contains(errOut, `running "apply"`) ||
		!strings.Contains(errOut, "advisory lock of the pg backend") {
		t.Fatalf("concurrent apply: exit %d\n%s", code, errOut)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the concurrent apply took %v to fail", d)
	}
	p.kill(t)

	s := open(a.stateDir())
	before := journalOf(t, s)
	if n := countKind(before, agentloop.StepTool); n != holdStep-1 {
		t.Fatalf("journal after kill -9 holds %d tool results, want %d", n, holdStep-1)
	}

	out = b.mustRun("apply", "-auto-approve", "-no-color")
	t.Logf("resumed in the other directory:\n%s", out)
	if !strings.Contains(out, "Apply complete") {
		t.Errorf("resume output lacks Apply complete")
	}
	checkOneOfEach(t, journalOf(t, s))
	if got := strings.TrimSpace(b.mustRun("output", "-raw", "answer")); got != finalAnswer {
		t.Errorf("output answer = %q, want %q", got, finalAnswer)
	}
	la, lb := a.mustRun("state", "list"), b.mustRun("state", "list")
	if la != lb || !strings.Contains(la, "run.job") || !strings.Contains(la, "sandbox.box") {
		t.Errorf("state list differs:\n%s\n---\n%s", la, lb)
	}
	for _, h := range []*harness{a, b} {
		if _, err := os.Stat(filepath.Join(h.stateDir(), "state.json")); !os.IsNotExist(err) {
			t.Errorf("%s: a local state file was written (%v)", h.dir, err)
		}
	}
	if out := b.mustRun("plan", "-no-color"); !strings.Contains(out, "No changes") {
		t.Errorf("plan after the resume:\n%s", out)
	}

	// The sandbox now lives in b's directory: a leaves it there and says
	// so, instead of restoring it for nothing.
	out = a.mustRun("plan", "-no-color")
	t.Logf("plan in the first directory:\n%s", out)
	if want := ownerNote(t, b); !strings.Contains(out, "No changes.") || !strings.Contains(out, want) {
		t.Errorf("plan in a, want No changes and %q:\n%s", want, out)
	}
}

// ownerNote is the plan note of a directory other than h's about
// sandbox.box, made in h.
func ownerNote(t *testing.T, h *harness) string {
	t.Helper()
	ws := localWorkspace(h)
	if ws == "" {
		t.Fatalf("no sandbox in %s", h.dir)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return "Note: sandbox.box lives in " + filepath.Dir(ws) + " on host " + host + "; it is restored here only when a run here needs it"
}

// TestPGSandboxOwner: a local sandbox belongs to the working directory
// that made it. Another directory sharing the backend plans no changes
// for it and says where it lives; a run there restores it there from its
// latest snapshot and takes it over, after which the first directory
// plans no changes in turn, naming the second. Gone from its owner's
// directory, it is restored by its owner as before.
func TestPGSandboxOwner(t *testing.T) {
	block, open := pgBackend(t)
	a, b := pgHarness(t, block), pgHarness(t, block)
	a.mustRun("init", "-no-color")
	b.mustRun("init", "-no-color")
	a.mustRun("apply", "-auto-approve", "-no-color")
	noteA, sbA := ownerNote(t, a), filepath.Dir(localWorkspace(a))

	out := b.mustRun("plan", "-no-color")
	t.Logf("plan in b:\n%s", out)
	if !strings.Contains(out, "No changes.") || !strings.Contains(out, noteA) {
		t.Fatalf("plan in b, want No changes and %q", noteA)
	}
	out = b.mustRun("plan", "-json")
	if !strings.Contains(out, `"type":"plan_note"`) || !strings.Contains(out, `"address":"sandbox.box"`) || !strings.Contains(out, sbA) {
		t.Errorf("plan -json in b lacks the plan_note naming %s:\n%s", sbA, out)
	}
	_, errOut, code := b.run("exec", "sandbox.box", "--", "true")
	if code == 0 || !strings.Contains(errOut, "sandbox.box lives in "+sbA) {
		t.Errorf("exec in b: exit %d\n%s", code, errOut)
	}

	// A run in b needs it: b restores it from the snapshot and owns it.
	out = b.mustRun("apply", "-auto-approve", "-no-color", "-replace=run.job")
	t.Logf("apply -replace=run.job in b:\n%s", out)
	if !strings.Contains(out, "sandbox.box will be restored from its snapshot") || !strings.Contains(out, "it lives in "+sbA) ||
		!strings.Contains(out, "run.job runs here: it is restored here from its latest snapshot, and this working directory becomes its owner") ||
		!strings.Contains(out, "Apply complete") {
		t.Errorf("apply in b does not restore sandbox.box for run.job")
	}
	ws := localWorkspace(b)
	if log, _ := os.ReadFile(filepath.Join(ws, "log.txt")); strings.Count(string(log), "step ") != 2*pipelineSteps {
		t.Errorf("log.txt in b has %d steps, want a's %d from the snapshot and the re-run's %d:\n%s", strings.Count(string(log), "step "), pipelineSteps, pipelineSteps, log)
	}
	st, err := open(b.stateDir()).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if data := string(st.Sandboxes["sandbox.box"].Session.Data); !strings.Contains(data, filepath.Dir(ws)) {
		t.Errorf("the backend's state records sandbox.box at %s, want b's %s", data, filepath.Dir(ws))
	}
	if out := b.mustRun("plan", "-no-color"); !strings.Contains(out, "No changes.") || strings.Contains(out, "Note:") {
		t.Errorf("plan in b, its owner now:\n%s", out)
	}
	out = a.mustRun("plan", "-no-color")
	t.Logf("plan in a:\n%s", out)
	if noteB := ownerNote(t, b); !strings.Contains(out, "No changes.") || !strings.Contains(out, noteB) {
		t.Errorf("plan in a, want No changes and %q", noteB)
	}

	// Gone from its owner's directory: planned as restored there.
	if err := os.RemoveAll(filepath.Dir(ws)); err != nil {
		t.Fatal(err)
	}
	if out := b.mustRun("plan", "-no-color"); !strings.Contains(out, "sandbox.box will be restored from its snapshot") || !strings.Contains(out, "sandbox no longer exists") {
		t.Errorf("plan in b once its sandbox directory is gone:\n%s", out)
	}
}

// TestPGMigrateState: a local state moved into the backend with init
// -migrate-state; the next plan has nothing to do.
func TestPGMigrateState(t *testing.T) {
	block, open := pgBackend(t)
	h := newHarness(t)
	h.mustRun("apply", "-auto-approve", "-no-color")
	local := h.readState()
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(block+pipelineConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := h.run("plan", "-no-color")
	if code == 0 || !strings.Contains(errOut, "init -migrate-state") {
		t.Fatalf("plan before init: exit %d\n%s", code, errOut)
	}
	_, errOut, code = h.run("init", "-no-color")
	if code == 0 || !strings.Contains(errOut, "A local state is in") {
		t.Fatalf("init without -migrate-state: exit %d\n%s", code, errOut)
	}
	out := h.mustRun("init", "-migrate-state", "-no-color")
	t.Logf("init -migrate-state:\n%s", out)
	if !strings.Contains(out, "Moved the local state") {
		t.Errorf("init output lacks the move")
	}
	if _, err := os.Stat(filepath.Join(h.stateDir(), "state.json")); !os.IsNotExist(err) {
		t.Errorf("the local state file is still in use (%v)", err)
	}
	if out := h.mustRun("plan", "-no-color"); !strings.Contains(out, "No changes") {
		t.Errorf("plan after the migration:\n%s", out)
	}
	s := open(h.stateDir())
	st, err := s.Read(context.Background())
	if err != nil || st.Lineage != local.Lineage || len(st.Runs) != 1 {
		t.Fatalf("backend state: %+v %v", st, err)
	}
	checkOneOfEach(t, journalOf(t, s))
	if out := h.mustRun("show", "-no-color", "run.job"); !strings.Contains(out, finalAnswer) {
		t.Errorf("show run.job after the migration (its transcript is in the backend):\n%s", out)
	}
	// A saved plan is checked against the backend's state: applied while
	// the state is as it was planned, refused once another command
	// changed it.
	h.mustRun("plan", "-no-color", "-replace=run.job", "-out=replace.plan")
	h.mustRun("plan", "-no-color", "-replace=run.job", "-out=stale.plan")
	if out := h.mustRun("apply", "-no-color", "replace.plan"); !strings.Contains(out, "1 runs executed") && !strings.Contains(out, "1 run executed") {
		t.Errorf("apply of the saved plan:\n%s", out)
	}
	_, errOut, code = h.run("apply", "-no-color", "stale.plan")
	if code == 0 || !strings.Contains(errOut, "Saved plan is stale") {
		t.Errorf("apply of a plan the backend's state moved past: exit %d\n%s", code, errOut)
	}
	// A journal lost from the backend is named where it was kept.
	if err := s.RemoveJournal(context.Background(), st.Runs["run.job"].Journal); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = h.run("show", "-no-color", "run.job")
	if code == 0 || !strings.Contains(errOut, st.Runs["run.job"].Journal+" in the pg backend") {
		t.Errorf("show run.job without its journal: exit %d\n%s", code, errOut)
	}

	// Pointed at another database, the configuration is refused until
	// init, naming both databases.
	conn := os.Getenv("AGENTCTL_TEST_PG")
	t.Setenv("AGENTCTL_TEST_PG", strings.Replace(conn, "/postgres?", "/elsewhere?", 1))
	_, errOut, code = h.run("plan", "-no-color")
	if code == 0 || !strings.Contains(errOut, "Backend configuration changed") || !strings.Contains(errOut, "/postgres, the connection string") ||
		!strings.Contains(errOut, "/elsewhere: point it back") {
		t.Errorf("plan against another database: exit %d\n%s", code, errOut)
	}
	t.Setenv("AGENTCTL_TEST_PG", conn)

	// Another state is never overwritten.
	other := newHarness(t)
	other.mustRun("apply", "-auto-approve", "-no-color")
	if err := os.WriteFile(filepath.Join(other.dir, "main.hcl"), []byte(block+pipelineConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = other.run("init", "-migrate-state", "-no-color")
	if code == 0 || !strings.Contains(errOut, "holds another state") || !strings.Contains(errOut, "refusing to overwrite") {
		t.Fatalf("migrating a second lineage: exit %d\n%s", code, errOut)
	}
}

// TestPGDatabaseRestart: the database restarts while an apply is in a
// tool call. The apply fails, saying so; the next apply resumes the run
// with at most the step in flight repeated.
func TestPGDatabaseRestart(t *testing.T) {
	block, open := pgBackend(t)
	h := pgHarness(t, block)
	h.mustRun("init", "-no-color")
	p := h.start("apply", "-auto-approve", "-no-color")
	h.waitUntil("the workspace", func() bool { return localWorkspace(h) != "" })
	ws := localWorkspace(h)
	hold := filepath.Join(ws, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitUntil("step 12 to start", func() bool { return lastLoggedStep(ws) == holdStep })
	if err := pg.Server(t).Restart(context.Background(), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// Let the lock's watchdog notice before the step ends.
	time.Sleep(5 * time.Second)
	os.Remove(hold)
	code := p.wait(t)
	t.Logf("apply across the restart (exit %d):\n%s", code, p.out)
	if code == 0 {
		t.Fatalf("the apply whose lock was lost succeeded")
	}
	if !strings.Contains(p.out.String(), "state lock lost") {
		t.Errorf("the apply's output does not say the lock was lost")
	}
	out := h.mustRun("apply", "-auto-approve", "-no-color")
	t.Logf("resumed:\n%s", out)
	s := open(h.stateDir())
	checkOneOfEach(t, journalOf(t, s))
	b, _ := os.ReadFile(filepath.Join(ws, "log.txt"))
	if n := strings.Count(string(b), fmt.Sprintf("step %d\n", holdStep+1)); n > 1 {
		t.Errorf("step %d ran %d times:\n%s", holdStep+1, n, b)
	}
	if got := strings.TrimSpace(h.mustRun("output", "-raw", "answer")); got != finalAnswer {
		t.Errorf("output answer = %q", got)
	}
}
