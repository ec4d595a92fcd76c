//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/digest"
)

// Kill points during the snapshot an apply takes after a run completes:
// agentctl dies while the tar is written (found by its open file in the
// snapshots directory), or at growing delays after the run's last model
// turn is checkpointed (before, during and after the snapshot). After
// each kill: no temporary snapshot file remains (at the latest once the
// next apply holds the lock), the state points to the last good snapshot
// (or none) whose file matches its recorded digest, and the next apply
// completes.

// snapshotConfig is one run whose single command writes 64 MB (so the
// snapshot takes a while) and a stamp that differs on every execution
// (so every snapshot differs), then answers.
const snapshotConfig = `provider "scripted" {
  script "worker" {
    reply {
      call "exec_command" {
        arguments = { cmd = "yes 0123456789abcdef | head -c 64000000 > big.bin; date +%s%N > stamp; echo written" }
      }
    }
    reply { text = "written" }
  }
}

provider "local" {}

manifest "ws" {
  file "README" { content = "snapshot kill points\n" }
}

sandbox "box" {
  provider = provider.local
  manifest = manifest.ws
}

capability "shell" "default" {}

agent "worker" {
  provider     = provider.scripted
  instructions = "Write the file."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
  max_turns    = 5
}

run "job" {
  agent = agent.worker
  input = "Write it."
}

output "answer" { value = run.job.output }
`

func newSnapshotHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(snapshotConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) snapshotsDir() string { return filepath.Join(h.stateDir(), "snapshots") }

// writingSnapshot reports whether process pid has a snapshot being
// written open: an unnamed (O_TMPFILE) or temporary file in the
// snapshots directory.
func (h *harness) writingSnapshot(pid int) bool {
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	prefix := h.snapshotsDir() + "/"
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil || !strings.HasPrefix(target, prefix) {
			continue
		}
		name := strings.TrimPrefix(target, prefix)
		if strings.HasPrefix(name, "#") || strings.Contains(name, ".tmp-") {
			return true
		}
	}
	return false
}

// snapshotTemps lists the files in the snapshots directory that are not
// snapshots.
func (h *harness) snapshotTemps() []string {
	ents, _ := os.ReadDir(h.snapshotsDir())
	var out []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".tar") || strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// goodSnapshot checks that the state's snapshot of sandbox.box (if any)
// is a file matching its recorded digest, and returns its path and
// digest ("" when there is none).
func (h *harness) goodSnapshot() (rel, recorded string) {
	h.t.Helper()
	st := h.readState()
	if st == nil || st.Sandboxes["sandbox.box"] == nil || st.Sandboxes["sandbox.box"].Snapshot == "" {
		return "", ""
	}
	sb := st.Sandboxes["sandbox.box"]
	if got := h.snapshotFileDigest(sb.Snapshot, sb.SnapshotDigest); got != digest.Named(sb.SnapshotDigest) {
		h.t.Fatalf("the state's snapshot %s has digest %s, the state records %s", sb.Snapshot, got, sb.SnapshotDigest)
	}
	return sb.Snapshot, sb.SnapshotDigest
}

// afterSnapshotKill checks what must hold right after a kill: the state
// reads, and its snapshot is the previous good one or a complete new one
// (when the kill came after the state was updated). It returns whether
// the run completed before the kill.
//
// With snapshotDone, the kill may also land after the new snapshot was
// recorded but before the run's completion was: the state then names the
// new snapshot (good, and of the finished workspace) with the run still
// running, and the resumed run snapshots again.
func (h *harness) afterSnapshotKill(prevRel, prevDigest string, snapshotDone ...bool) bool {
	h.t.Helper()
	h.mustRun("state", "list")
	rel, digest := h.goodSnapshot()
	r := h.readState().Runs["run.job"]
	completed := r != nil && r.Status == "completed"
	if !completed && len(snapshotDone) == 0 && (rel != prevRel || digest != prevDigest) {
		h.t.Fatalf("run not completed, yet the state's snapshot changed from %q (%s) to %q (%s)", prevRel, prevDigest, rel, digest)
	}
	return completed
}

// applyAndCheck runs apply to completion and checks that no temporary
// snapshot file is left and that the state's snapshot is good and
// holds the run's answer.
func (h *harness) applyAndCheck(args ...string) (rel, digest string) {
	h.t.Helper()
	h.mustRun(append([]string{"apply", "-auto-approve", "-no-color"}, args...)...)
	if tmp := h.snapshotTemps(); len(tmp) > 0 {
		h.t.Fatalf("temporary snapshot files left after a complete apply: %v", tmp)
	}
	if r := h.readState().Runs["run.job"]; r == nil || r.Status != "completed" {
		h.t.Fatalf("run.job after apply: %+v", r)
	}
	rel, digest = h.goodSnapshot()
	if rel == "" {
		h.t.Fatal("no snapshot after a completed run")
	}
	return rel, digest
}

// onlyStateSnapshot checks that the snapshots directory holds the
// state's snapshot and nothing else: earlier snapshots are removed once a
// new one is recorded.
func (h *harness) onlyStateSnapshot(rel string) {
	h.t.Helper()
	ents, _ := os.ReadDir(h.snapshotsDir())
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != filepath.Base(rel) {
		h.t.Fatalf("snapshots directory holds %v, want only the state's %s", names, rel)
	}
}

func TestCrashDuringSnapshot(t *testing.T) {
	h := newSnapshotHarness(t)

	// 1. The first snapshot: there is no previous one.
	p := h.start("apply", "-auto-approve", "-no-color")
	h.waitUntil("the first snapshot to be written", func() bool { return h.writingSnapshot(p.cmd.Process.Pid) })
	p.kill(t)
	if h.afterSnapshotKill("", "") {
		t.Log("the run completed before the kill")
	}
	t.Logf("after a kill during the first snapshot: files beside the snapshots: %v", h.snapshotTemps())
	rel, digest := h.applyAndCheck()
	h.onlyStateSnapshot(rel)

	// 2. A later snapshot: the previous one stays in place and in state.
	p = h.start("apply", "-auto-approve", "-no-color", "-replace=run.job")
	h.waitUntil("the second snapshot to be written", func() bool { return h.writingSnapshot(p.cmd.Process.Pid) })
	p.kill(t)
	if h.afterSnapshotKill(rel, digest) {
		t.Fatal("the run completed although agentctl was killed while writing its snapshot")
	}
	if r := h.readState().Runs["run.job"]; r.Status != "running" {
		t.Fatalf("run.job status %q after the kill, want running", r.Status)
	}
	out := h.mustRun("plan", "-no-color")
	if !strings.Contains(out, "# run.job will be resumed") {
		t.Fatalf("plan after a kill during the snapshot does not resume the run:\n%s", out)
	}
	rel2, digest2 := h.applyAndCheck()
	if digest2 == digest {
		t.Fatal("the resumed run's snapshot is the old one")
	}
	h.onlyStateSnapshot(rel2)

	// 3. Kills at growing delays after the last model turn is
	// checkpointed land before, during and after the snapshot.
	rel, digest = rel2, digest2
	for _, delay := range []time.Duration{0, 2, 5, 10, 20, 40, 80, 160, 320} {
		p := h.start("apply", "-auto-approve", "-no-color", "-replace=run.job")
		h.waitUntil("the run's answer in the journal", func() bool {
			st := h.readState()
			return st != nil && st.Runs["run.job"] != nil && st.Runs["run.job"].Status == "running" &&
				countKind(h.journal(), agentloop.StepModel) >= 2
		})
		time.Sleep(delay * time.Millisecond)
		p.kill(t)
		completed := h.afterSnapshotKill(rel, digest, true)
		t.Logf("killed %v after the answer: run completed %v, files beside the snapshots %v", delay*time.Millisecond, completed, h.snapshotTemps())
		rel, digest = h.applyAndCheck()
		if !completed {
			// The resumed run took a snapshot, which removed the others.
			h.onlyStateSnapshot(rel)
		}
	}
	// One more run cleans up whatever a kill between recording a
	// snapshot and removing the previous one left.
	rel, _ = h.applyAndCheck("-replace=run.job")
	h.onlyStateSnapshot(rel)
}

// TestStaleSnapshotTempRemoved: a temporary snapshot file left by a crash
// (between linking it and renaming it into place, or where O_TMPFILE is
// not available) is removed by the next apply, even one with nothing to
// do, and the snapshot itself is kept.
func TestStaleSnapshotTempRemoved(t *testing.T) {
	h := newSnapshotHarness(t)
	rel, digest := h.applyAndCheck()
	stale := filepath.Join(h.snapshotsDir(), "."+filepath.Base(rel)+".tmp-crashed")
	if err := os.WriteFile(stale, []byte("a partial snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := h.mustRun("apply", "-auto-approve", "-no-color")
	if !strings.Contains(out, "No changes.") {
		t.Fatalf("apply:\n%s", out)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temporary snapshot still there: %v", err)
	}
	if rel2, digest2 := h.goodSnapshot(); rel2 != rel || digest2 != digest {
		t.Fatalf("snapshot changed: %s %s", rel2, digest2)
	}
}
