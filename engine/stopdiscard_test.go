package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestOnExitStopDiscards: a sandbox whose Stop loses its workspace (a
// Kubernetes Pod without a claim) is snapshotted before on_exit stops it
// (here no run did), recorded as removed, left alone by a plan with
// nothing to run (an unchanged configuration applies as nothing), and
// restored from its snapshot, manifest files included, by the run that
// needs it.
func TestOnExitStopDiscards(t *testing.T) {
	ctx := context.Background()
	dir, mp := t.TempDir(), &memProvider{stopDiscards: true}
	full := fmt.Sprintf(memConfig, "hi")
	sbOnly := full[:strings.Index(full, "run \"r\" {")]
	e := newMemEngine(t, dir, sbOnly, mp)
	st := planApply(t, e, PlanOptions{})
	ss := st.Sandboxes["sandbox.s"]
	if ss.Status != statusDeleted || ss.Snapshot == "" {
		t.Fatalf("after on_exit stop: status %q, snapshot %q; want it snapshotted and removed", ss.Status, ss.Snapshot)
	}
	if got, _ := mp.boxes[ss.Session.ID].Refresh(ctx); got != "missing" {
		t.Fatalf("the sandbox was not stopped: %s", got)
	}
	p, err := e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil || p.HasChanges() {
		t.Fatalf("plan of the unchanged configuration: %v, %v", actions(p), err)
	}
	if _, _, err := e.OpenWorkspace(ctx, st, "sandbox.s"); err == nil || !strings.Contains(err.Error(), "kept in its snapshot (on_exit = \"stop\")") {
		t.Fatalf("exec on the removed sandbox: %v", err)
	}

	// A run that needs it restores it, then it is stopped again.
	e = newMemEngine(t, dir, full, mp)
	p, err = e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(p); got["sandbox.s"] != ActionNoop || got["run.r"] != ActionExecute {
		t.Fatalf("plan with a new run: %v", got)
	}
	if err := e.Apply(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	if r := st.Runs["run.r"]; r.Status != RunCompleted {
		t.Fatalf("run.r: %s %s", r.Status, r.Error)
	}
	if len(mp.created) != 2 {
		t.Fatalf("sandboxes created: %d; want the first and its restore", len(mp.created))
	}
	restored := mp.boxes[fmt.Sprintf("mem-%d", 2)]
	restored.mu.Lock()
	f, lost := restored.files["hello.txt"], restored.discarded["hello.txt"]
	restored.mu.Unlock()
	if f != nil || lost == nil || string(lost.data) != "hello" {
		t.Fatalf("the restored sandbox: holds %v after on_exit stop, held %v before; want its snapshot's hello.txt, then nothing", f, lost)
	}
	if ss := st.Sandboxes["sandbox.s"]; ss.Status != statusDeleted || ss.Session.ID != "mem-2" {
		t.Fatalf("after the run: %+v", ss)
	}
	p, err = e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil || p.HasChanges() {
		t.Fatalf("plan after the run: %v, %v", actions(p), err)
	}
}

// TestOnExitStopDiscardsNeedsSnapshot: when such a sandbox cannot be
// snapshotted, on_exit leaves it running (stopping it would lose its
// workspace) and the apply fails saying so.
func TestOnExitStopDiscardsNeedsSnapshot(t *testing.T) {
	ctx := context.Background()
	dir, mp := t.TempDir(), &memProvider{stopDiscards: true}
	full := fmt.Sprintf(memConfig, "hi")
	e := newMemEngine(t, dir, full[:strings.Index(full, "run \"r\" {")], mp)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox is created by the apply; its workspace then cannot be
	// read.
	e.Events = func(ev Event) {
		if ev.Address == "sandbox.s" && ev.Type == EventApplyComplete {
			for _, sb := range mp.boxes {
				sb.mu.Lock()
				sb.copyOutErr = errors.New("reading the workspace failed")
				sb.mu.Unlock()
			}
		}
	}
	err = e.Apply(ctx, st, p)
	if err == nil || !strings.Contains(err.Error(), "it keeps running, since stopping it would lose its workspace") || !strings.Contains(err.Error(), "reading the workspace failed") {
		t.Fatalf("apply: %v", err)
	}
	ss := st.Sandboxes["sandbox.s"]
	if ss.Status == statusDeleted || ss.Snapshot != "" {
		t.Fatalf("sandbox.s: status %q, snapshot %q; want it left as it was", ss.Status, ss.Snapshot)
	}
	if got, _ := mp.boxes[ss.Session.ID].Refresh(ctx); got != "running" {
		t.Fatalf("the sandbox was stopped without a snapshot: %s", got)
	}
}
