package engine

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// copyState copies the state directory of from into to, as a backend
// shares it, without from's sandboxes (which stay in from's directory).
func copyState(t *testing.T, from, to string) {
	t.Helper()
	src, dst := filepath.Join(from, ".agentctl"), filepath.Join(to, ".agentctl")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if rel == "sandboxes" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sandboxDir is the directory of the one sandbox made in dir.
func sandboxDir(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, ".agentctl", "sandboxes", "*", "workspace"))
	if len(m) != 1 {
		t.Fatalf("sandboxes in %s: %v, want one", dir, m)
	}
	return filepath.Dir(m[0])
}

// TestSandboxOfAnotherDirectory: a local sandbox recorded in a state
// that another working directory shares is left where it lives, with a
// plan note, while no run needs it; a run that needs it restores it here,
// also when planned without a refresh, and this directory becomes its
// owner, which the first directory's plan then names.
func TestSandboxOfAnotherDirectory(t *testing.T) {
	src := restoreConfig("echo ran >> log.txt", "stop")
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := engineIn(t, dirA, src), engineIn(t, dirB, src)
	planApply(t, a, PlanOptions{})
	sbA := sandboxDir(t, dirA)
	copyState(t, dirA, dirB)

	_, p := plan(t, b, PlanOptions{})
	if p.HasChanges() || len(p.Notes) != 1 || p.Notes[0].Address != "sandbox.s" ||
		!strings.Contains(p.Notes[0].Message, "sandbox.s lives in "+sbA+" on host ") ||
		!strings.HasSuffix(p.Notes[0].Message, "; it is restored here only when a run here needs it") {
		t.Fatalf("plan in b: changes %v, notes %+v", p.Changes, p.Notes)
	}
	_, p = plan(t, b, PlanOptions{Destroy: true})
	if c := p.Change("sandbox.s"); c.Action != ActionDelete || len(c.Reasons) != 2 || !strings.HasPrefix(c.Reasons[1], "it lives in "+sbA+" on host ") ||
		!strings.HasSuffix(c.Reasons[1], ", whose files are not removed from here: remove them there") {
		t.Errorf("plan -destroy in b: sandbox.s %s %q", c.Action, c.Reasons)
	}
	_, p = plan(t, b, PlanOptions{Replace: []string{"run.r"}})
	if c := p.Change("sandbox.s"); c.Action != ActionRestore || len(c.Reasons) != 1 ||
		!strings.Contains(c.Reasons[0], "it lives in "+sbA) || !strings.Contains(c.Reasons[0], "run.r runs here: it is restored here from its latest snapshot") {
		t.Fatalf("plan -replace=run.r in b: sandbox.s %s %q", c.Action, c.Reasons)
	}
	if len(p.Notes) != 0 {
		t.Errorf("notes of a plan that restores the sandbox: %+v", p.Notes)
	}

	// Planned without a refresh: the run restores it when it needs it,
	// saying so.
	var mu sync.Mutex
	var said []string
	b.Events = func(ev Event) {
		if ev.Type == EventApplyProgress && ev.Address == "sandbox.s" {
			mu.Lock()
			said = append(said, ev.Message)
			mu.Unlock()
		}
	}
	st, err := b.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err = b.Plan(ctx, st, PlanOptions{Replace: []string{"run.r"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(said) != 1 || !strings.Contains(said[0], "it lives in "+sbA+" on host ") || !strings.Contains(said[0], "this working directory becomes its owner") {
		t.Errorf("apply progress of sandbox.s: %q", said)
	}
	mu.Unlock()
	sbB := sandboxDir(t, dirB)
	if log, _ := os.ReadFile(filepath.Join(sbB, "workspace", "log.txt")); string(log) != "ran\nran\n" {
		t.Errorf("log.txt in b = %q, want a's line from the snapshot and the re-run's", log)
	}
	if st := readState(t, b); !strings.Contains(string(st.Sandboxes["sandbox.s"].Session.Data), sbB) {
		t.Errorf("b's state records sandbox.s at %s, want %s", st.Sandboxes["sandbox.s"].Session.Data, sbB)
	}
	if _, p := plan(t, b, PlanOptions{}); p.HasChanges() || len(p.Notes) != 0 {
		t.Errorf("plan in b, its owner now: %v %+v", p.Changes, p.Notes)
	}

	copyState(t, dirB, dirA)
	if _, p := plan(t, a, PlanOptions{}); p.HasChanges() || len(p.Notes) != 1 || !strings.Contains(p.Notes[0].Message, "sandbox.s lives in "+sbB+" on host ") {
		t.Errorf("plan in a: changes %v, notes %+v", p.Changes, p.Notes)
	}
	ws, _, err := a.OpenWorkspace(ctx, readState(t, a), "sandbox.s")
	if ws != nil || err == nil || !strings.Contains(err.Error(), "sandbox.s lives in "+sbB) {
		t.Errorf("OpenWorkspace in a: %v", err)
	}
}
