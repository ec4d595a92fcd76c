package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/state"
)

// restoreConfig is one run whose command cmd shapes the workspace of
// sandbox.s (a local sandbox) and whose snapshot the tests restore.
func restoreConfig(cmd, onExit string) string {
	return fmt.Sprintf(`
provider "scripted" {
  script "a" {
    reply {
      call "exec_command" {
        arguments = { cmd = %q }
      }
    }
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
manifest "m" {
  file "README" { content = "manifest file\n" }
}
sandbox "s" {
  provider = provider.local
  manifest = manifest.m
  on_exit  = %q
}
capability "shell" "default" {}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  sandbox      = sandbox.s
  capabilities = [capability.shell.default]
}
run "r" {
  agent = agent.a
  input = "go"
}
`, cmd, onExit)
}

// plan plans against the state on disk, refreshing the sandboxes.
func plan(t *testing.T, e *Engine, opts PlanOptions) (*state.State, *Plan) {
	t.Helper()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	opts.Refresh = true
	p, err := e.Plan(context.Background(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st, p
}

// applyErr plans and applies, returning apply's error.
func applyErr(t *testing.T, e *Engine, opts PlanOptions) error {
	t.Helper()
	st, p := plan(t, e, opts)
	return e.Apply(context.Background(), st, p)
}

func readState(t *testing.T, e *Engine) *state.State {
	t.Helper()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// loseSandbox removes the local sandbox's directory behind agentctl's
// back, as a machine cleanup would.
func loseSandbox(t *testing.T, e *Engine) {
	t.Helper()
	if err := os.RemoveAll(readState(t, e).Sandboxes["sandbox.s"].Session.ID); err != nil {
		t.Fatal(err)
	}
}

func workspaceOf(t *testing.T, e *Engine) string {
	t.Helper()
	return filepath.Join(readState(t, e).Sandboxes["sandbox.s"].Session.ID, "workspace")
}

func snapshotPath(t *testing.T, e *Engine) string {
	t.Helper()
	ss := readState(t, e).Sandboxes["sandbox.s"]
	if ss.Snapshot == "" {
		t.Fatal("sandbox.s has no snapshot")
	}
	return e.State.Abs(ss.Snapshot)
}

func sandboxChange(t *testing.T, p *Plan) *Change {
	t.Helper()
	c := p.Change("sandbox.s")
	if c == nil {
		t.Fatal("no change for sandbox.s in the plan")
	}
	return c
}

// TestRestoreKeepsForeignSymlinks: a workspace holding symlinks whose
// targets leave it (absolute, as in a Python venv, and relative ones
// climbing out with "..") is snapshotted and, after the sandbox is lost,
// restored with the links back as links with the same targets; nothing
// they point at on the host is touched.
func TestRestoreKeepsForeignSymlinks(t *testing.T) {
	links := map[string]string{
		"venv/bin/python": "/usr/bin/python3",
		"venv/lib64":      "lib",
		"abslink":         "/etc/passwd",
		"etcdir":          "/etc",
		"up":              "../../../../outside",
		"deep/up":         "../../../../../outside/secret.txt",
	}
	var cmd strings.Builder
	cmd.WriteString("mkdir -p venv/bin venv/lib deep && echo data > data.txt")
	for _, name := range slices.Sorted(maps.Keys(links)) {
		fmt.Fprintf(&cmd, " && ln -s %s %s", links[name], name)
	}
	e, dir := newTestEngine(t, restoreConfig(cmd.String(), "stop"))
	// "up" resolves, from the workspace, to this directory beside the
	// configuration.
	outside := filepath.Join(dir, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}

	st := planApply(t, e, PlanOptions{})
	if r := st.Runs["run.r"]; r.Status != RunCompleted {
		t.Fatalf("run.r: %s %s", r.Status, r.Error)
	}
	before := readState(t, e).Sandboxes["sandbox.s"]
	ws := workspaceOf(t, e)
	if got, err := os.Readlink(filepath.Join(ws, "up")); err != nil || got != links["up"] {
		t.Fatalf("the run did not make the links: %q %v", got, err)
	}

	loseSandbox(t, e)
	if _, p := plan(t, e, PlanOptions{}); sandboxChange(t, p).Action != ActionRestore {
		t.Fatalf("plan after losing the sandbox: %+v, want restore", sandboxChange(t, p))
	}
	planApply(t, e, PlanOptions{})

	after := readState(t, e).Sandboxes["sandbox.s"]
	ws = workspaceOf(t, e)
	for name, target := range links {
		got, err := os.Readlink(filepath.Join(ws, name))
		if err != nil || got != target {
			t.Errorf("%s after the restore: link to %q, %v; want a link to %q", name, got, err, target)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "data.txt")); err != nil || string(b) != "data\n" {
		t.Errorf("data.txt after the restore: %q, %v", b, err)
	}
	if after.RestorePending != nil || after.ManifestDigest != before.ManifestDigest || after.SnapshotDigest != before.SnapshotDigest {
		t.Errorf("state after the restore: pending %+v, manifest digest %s (was %s), snapshot digest %s (was %s)",
			after.RestorePending, after.ManifestDigest, before.ManifestDigest, after.SnapshotDigest, before.SnapshotDigest)
	}
	// Nothing on the host was touched.
	if b, err := os.ReadFile("/etc/passwd"); err != nil || !bytes.Equal(b, passwd) {
		t.Errorf("/etc/passwd changed: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("the directory the links point at changed: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "secret" {
		t.Errorf("the file a link points at changed: %q", b)
	}
	if _, p := plan(t, e, PlanOptions{}); p.HasChanges() {
		t.Errorf("plan after the restore has changes: %+v", p.Changes)
	}
}

// TestRestoreFailureStaysPending: a restore from a damaged snapshot file
// fails; the state keeps the sandbox marked as needing a restore, plan
// proposes the restore again with the reason (never "No changes"), the
// snapshot file is left as it is, and once the file is fixed the next
// apply restores it.
func TestRestoreFailureStaysPending(t *testing.T) {
	for _, damage := range []string{"flipped byte", "truncated"} {
		t.Run(damage, func(t *testing.T) {
			e, _ := newTestEngine(t, restoreConfig("mkdir -p out && seq 1 20000 > out/numbers.txt && echo done > out/status", "stop"))
			planApply(t, e, PlanOptions{})
			snap := snapshotPath(t, e)
			good, err := os.ReadFile(snap)
			if err != nil {
				t.Fatal(err)
			}
			bad := slices.Clone(good)
			switch damage {
			case "flipped byte":
				// Inside numbers.txt's content: the archive still reads.
				i := bytes.Index(bad, []byte("\n10000\n"))
				if i < 0 {
					t.Fatal("numbers.txt content not found in the snapshot")
				}
				bad[i+1] = '9'
			case "truncated":
				bad = bad[:len(bad)/2]
			}
			if err := os.WriteFile(snap, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			loseSandbox(t, e)

			err = applyErr(t, e, PlanOptions{})
			if err == nil {
				t.Fatal("apply restored from a damaged snapshot without an error")
			}
			for _, want := range []string{"sandbox.s", "restoring snapshot", "stays marked as needing a restore"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("apply error does not mention %q: %v", want, err)
				}
			}
			if damage == "flipped byte" && !strings.Contains(err.Error(), "recorded when it was written") {
				t.Errorf("apply error does not say the file does not match its digest: %v", err)
			}
			ss := readState(t, e).Sandboxes["sandbox.s"]
			if ss.RestorePending == nil || ss.RestorePending.Error == "" {
				t.Fatalf("sandbox.s after the failed restore: restore_pending %+v, want set with the error", ss.RestorePending)
			}
			if ss.ManifestDigest != "" || len(ss.EntryDigests) != 0 {
				t.Errorf("the failed restore recorded the snapshot's digests: %s %v", ss.ManifestDigest, ss.EntryDigests)
			}
			if b, _ := os.ReadFile(snap); !bytes.Equal(b, bad) {
				t.Error("the snapshot file changed after the failed restore")
			}
			// exec and tool call refuse the incomplete workspace.
			if _, _, err := e.OpenWorkspace(context.Background(), readState(t, e), "sandbox.s"); err == nil || !strings.Contains(err.Error(), "did not finish") {
				t.Errorf("OpenWorkspace on a sandbox whose restore did not finish: %v", err)
			}

			// Plan proposes the restore again, saying why; the run is
			// unchanged. A second apply fails the same way.
			for range 2 {
				_, p := plan(t, e, PlanOptions{})
				c := sandboxChange(t, p)
				if c.Action != ActionRestore || len(c.Reasons) == 0 || !strings.HasPrefix(c.Reasons[0], "a previous restore did not finish: ") {
					t.Fatalf("plan after the failed restore: %s %q", c.Action, c.Reasons)
				}
				if rc := p.Change("run.r"); rc.Action != ActionNoop {
					t.Errorf("run.r planned as %s %q", rc.Action, rc.Reasons)
				}
				if err := applyErr(t, e, PlanOptions{}); err == nil {
					t.Fatal("apply succeeded with the damaged snapshot")
				}
			}
			if b, _ := os.ReadFile(snap); !bytes.Equal(b, bad) {
				t.Error("the snapshot file changed after the failed restores")
			}

			// Fixed: the next apply restores.
			if err := os.WriteFile(snap, good, 0o600); err != nil {
				t.Fatal(err)
			}
			planApply(t, e, PlanOptions{})
			ss = readState(t, e).Sandboxes["sandbox.s"]
			if ss.RestorePending != nil || ss.ManifestDigest == "" {
				t.Fatalf("sandbox.s after the restore: restore_pending %+v, manifest digest %q", ss.RestorePending, ss.ManifestDigest)
			}
			ws := workspaceOf(t, e)
			if b, _ := os.ReadFile(filepath.Join(ws, "out", "status")); string(b) != "done\n" {
				t.Errorf("out/status after the restore: %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "out", "numbers.txt")); !bytes.HasPrefix(b, []byte("1\n2\n")) || !bytes.HasSuffix(b, []byte("\n20000\n")) || !bytes.Contains(b, []byte("\n10000\n")) {
				t.Errorf("out/numbers.txt after the restore is not the snapshot's (%d bytes)", len(b))
			}
			if b, _ := os.ReadFile(snap); !bytes.Equal(b, good) {
				t.Error("the snapshot file changed after the restore")
			}
			if _, p := plan(t, e, PlanOptions{}); p.HasChanges() {
				t.Errorf("plan after the restore has changes: %+v", p.Changes)
			}
		})
	}
}

// TestRestoreFailureDoesNotRun: a run that needs a sandbox deleted by
// on_exit restores it first; when that restore fails, the run fails
// without running on the incomplete workspace and nothing replaces the
// snapshot. After the file is fixed the run restores and runs, on top of
// the snapshot's files.
func TestRestoreFailureDoesNotRun(t *testing.T) {
	e, _ := newTestEngine(t, restoreConfig("echo x >> count.txt", "delete"))
	planApply(t, e, PlanOptions{})
	if ss := readState(t, e).Sandboxes["sandbox.s"]; ss.Status != statusDeleted {
		t.Fatalf("sandbox.s status %q, want deleted", ss.Status)
	}
	snap := snapshotPath(t, e)
	good, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	bad := good[:len(good)-700] // the end of the archive is missing
	if err := os.WriteFile(snap, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	err = applyErr(t, e, PlanOptions{Replace: []string{"run.r"}})
	if err == nil || !strings.Contains(err.Error(), "run.r: sandbox.s: restoring snapshot") {
		t.Fatalf("apply -replace=run.r with a damaged snapshot: %v", err)
	}
	if b, _ := os.ReadFile(snap); !bytes.Equal(b, bad) {
		t.Error("the snapshot file changed")
	}
	ss := readState(t, e).Sandboxes["sandbox.s"]
	if ss.RestorePending == nil {
		t.Fatal("sandbox.s is not marked as needing a restore")
	}
	_, p := plan(t, e, PlanOptions{})
	if c := sandboxChange(t, p); c.Action != ActionRestore || !strings.HasPrefix(c.Reasons[0], "a previous restore did not finish: ") {
		t.Fatalf("plan: %s %q", c.Action, c.Reasons)
	}

	if err := os.WriteFile(snap, good, 0o600); err != nil {
		t.Fatal(err)
	}
	st := planApply(t, e, PlanOptions{Replace: []string{"run.r"}})
	if r := st.Runs["run.r"]; r.Status != RunCompleted {
		t.Fatalf("run.r: %s %s", r.Status, r.Error)
	}
	// The run appended to the restored count.txt: two lines, one from the
	// first run (in the snapshot) and one now; none from the failed tries.
	if got := snapshotFile(t, snapshotPath(t, e), "count.txt"); got != "x\nx\n" {
		t.Fatalf("count.txt in the new snapshot = %q, want two lines", got)
	}
}

// snapshotFile reads one file out of a snapshot tar.
func snapshotFile(t *testing.T, snap, name string) string {
	t.Helper()
	f, err := os.Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s is not in the snapshot", name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "./") == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}

// TestRestoreMissingSnapshot: a snapshot file deleted by hand is reported
// by plan and by apply with the sandbox and the file; apply creates
// nothing, and -replace=sandbox.NAME recreates the sandbox from its
// manifest.
func TestRestoreMissingSnapshot(t *testing.T) {
	for _, onExit := range []string{"stop", "delete"} {
		t.Run("on_exit="+onExit, func(t *testing.T) {
			e, dir := newTestEngine(t, restoreConfig("echo x > out.txt", onExit))
			planApply(t, e, PlanOptions{})
			snap := snapshotPath(t, e)
			if err := os.Remove(snap); err != nil {
				t.Fatal(err)
			}
			if onExit == "stop" {
				loseSandbox(t, e)
			}
			_, p := plan(t, e, PlanOptions{})
			c := sandboxChange(t, p)
			reasons := strings.Join(c.Reasons, "\n")
			if c.Action != ActionRestore {
				t.Fatalf("plan: %s %q, want restore", c.Action, c.Reasons)
			}
			for _, want := range []string{"apply will fail", snap, "missing", "-replace=sandbox.s"} {
				if !strings.Contains(reasons, want) {
					t.Errorf("plan reasons do not mention %q: %q", want, c.Reasons)
				}
			}
			err := applyErr(t, e, PlanOptions{})
			if err == nil {
				t.Fatal("apply without the snapshot file succeeded")
			}
			for _, want := range []string{"sandbox.s", snap, "missing", "lost", "-replace=sandbox.s"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("apply error does not mention %q: %v", want, err)
				}
			}
			// Nothing was created.
			if ents, _ := os.ReadDir(filepath.Join(dir, ".agentctl", "sandboxes")); len(ents) != 0 {
				t.Errorf("sandbox directories after the failed restore: %v", ents)
			}
			if ss := readState(t, e).Sandboxes["sandbox.s"]; ss == nil || ss.Snapshot == "" {
				t.Errorf("sandbox.s after the failed restore: %+v", ss)
			}

			err = applyErr(t, e, PlanOptions{Replace: []string{"sandbox.s"}})
			if onExit == "delete" && err != nil && strings.Contains(err.Error(), "no run has snapshotted it yet") {
				// The new sandbox has no snapshot yet, so on_exit stops it
				// rather than deleting it, and says so.
				err = nil
			}
			if err != nil {
				t.Fatalf("apply -replace=sandbox.s: %v", err)
			}
			st := readState(t, e)
			ss := st.Sandboxes["sandbox.s"]
			if ss.RestorePending != nil {
				t.Errorf("sandbox.s after -replace is marked for restore: %+v", ss.RestorePending)
			}
			if r := st.Runs["run.r"]; r.Status != RunCompleted {
				t.Errorf("run.r after -replace=sandbox.s: %s", r.Status)
			}
			if onExit == "stop" {
				ws := workspaceOf(t, e)
				if b, _ := os.ReadFile(filepath.Join(ws, "README")); string(b) != "manifest file\n" {
					t.Errorf("README after -replace: %q", b)
				}
				if _, err := os.Stat(filepath.Join(ws, "out.txt")); err == nil {
					t.Error("out.txt is back without a snapshot")
				}
			}
			if _, p := plan(t, e, PlanOptions{}); p.HasChanges() {
				t.Errorf("plan after -replace has changes: %+v", p.Changes)
			}
		})
	}
}

// A snapshot is named for its state's lineage. The next snapshot removes
// the one the state pointed to, even one named before names carried the
// lineage, and never the snapshot files of another state sharing the
// directory.
func TestSnapshotNamesScopedToLineage(t *testing.T) {
	e, _ := newTestEngine(t, restoreConfig("echo one > f.txt", "keep"))
	if err := applyErr(t, e, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	st := readState(t, e)
	ss := st.Sandboxes["sandbox.s"]
	base := state.ScopedName(st.Lineage, "sandbox.s")
	if !strings.HasPrefix(filepath.Base(ss.Snapshot), base+"@") {
		t.Fatalf("snapshot %s, want one named %s@...", ss.Snapshot, base)
	}
	// As an earlier version named it, and another state's files: one in
	// the earlier form, one named for another lineage.
	old := filepath.Join("snapshots", state.SafeName("sandbox.s")+"@old.tar")
	if err := os.Rename(e.State.Abs(ss.Snapshot), e.State.Abs(old)); err != nil {
		t.Fatal(err)
	}
	ss.Snapshot = old
	if err := e.State.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	others := []string{
		filepath.Join("snapshots", state.SafeName("sandbox.s")+"@other.tar"),
		filepath.Join("snapshots", state.ScopedName("0123456789ab-cdef", "sandbox.s")+"@other.tar"),
	}
	for _, o := range others {
		if err := os.WriteFile(e.State.Abs(o), []byte("another state's"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	if err := applyErr(t, e, PlanOptions{Replace: []string{"run.r"}}); err != nil {
		t.Fatal(err)
	}
	now := readState(t, e).Sandboxes["sandbox.s"].Snapshot
	if now == old || !strings.HasPrefix(filepath.Base(now), base+"@") {
		t.Fatalf("snapshot after the re-run: %s", now)
	}
	if _, err := os.Stat(e.State.Abs(old)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot the state pointed to before, %s, is still there: %v", old, err)
	}
	for _, o := range others {
		if _, err := os.Stat(e.State.Abs(o)); err != nil {
			t.Errorf("another state's snapshot %s: %v", o, err)
		}
	}

	// destroy removes this state's snapshot only.
	if err := applyErr(t, e, PlanOptions{Destroy: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.State.Abs(now)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("destroy left %s: %v", now, err)
	}
	for _, o := range others {
		if _, err := os.Stat(e.State.Abs(o)); err != nil {
			t.Errorf("destroy removed another state's snapshot %s: %v", o, err)
		}
	}
}
