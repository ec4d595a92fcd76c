package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/digest"
)

// Restore under kill -9: a completed run leaves a snapshot of about 100 MB
// (400 files and an absolute symlink); the sandbox is then lost, and
// agentctl is killed while it restores it, at points observed from
// outside: as soon as the state records the new sandbox as restoring, and
// when the new workspace holds part of the snapshot's files. After each
// kill, plan proposes the restore again and says why, the snapshot file is
// the good one, and at the end apply restores exactly the snapshot's
// files.

const restoreFiles = 400

func restoreJobConfig() string {
	cmd := fmt.Sprintf(`mkdir -p data && yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 262144 > data/f0000 && `+
		`for i in $(seq -w 1 %d); do cp data/f0000 data/f0$i && echo "file $i" >> data/f0$i; done && `+
		`ln -s /etc/passwd abslink && mkdir -p venv/bin && ln -s /usr/bin/python3 venv/bin/python && echo done > zz-last`, restoreFiles-1)
	return fmt.Sprintf(`provider "scripted" {
  script "worker" {
    reply {
      call "exec_command" {
        arguments = { cmd = %q }
      }
    }
    reply { text = "made the files" }
  }
}

provider "local" {}

manifest "ws" {
  file "README" { content = "restore under kill -9\n" }
}

sandbox "box" {
  provider = provider.local
  manifest = manifest.ws
}

capability "shell" "default" {
  timeout = "600s"
}

agent "worker" {
  provider     = provider.scripted
  instructions = "Make the files."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}

run "job" {
  agent = agent.worker
  input = "Make the files."
}
`, cmd)
}

// tree describes a workspace: each file's SHA-256, each link's target,
// each directory.
func (h *harness) tree(ws string) map[string]string {
	h.t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link " + t
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = "file " + hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		h.t.Fatalf("reading the workspace %s: %v", ws, err)
	}
	return out
}

// snapshotSum is the digest of sandbox.box's snapshot file and the
// digest the state records for it, both with their algorithm named
// (digest.Named).
func (h *harness) snapshotSum() (file, recorded string) {
	h.t.Helper()
	ss := h.readState().Sandboxes["sandbox.box"]
	return h.snapshotFileDigest(ss.Snapshot, ss.SnapshotDigest), digest.Named(ss.SnapshotDigest)
}

// snapshotFileDigest is the digest of the snapshot file rel (relative to
// the state directory) with the algorithm of recorded, its algorithm
// named ("blake3:<hex>"; digest.Named gives a recorded digest the same
// form).
func (h *harness) snapshotFileDigest(rel, recorded string) string {
	h.t.Helper()
	alg, _, err := digest.Parse(recorded)
	if err != nil {
		h.t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(h.stateDir(), rel))
	if err != nil {
		h.t.Fatalf("the state's snapshot %s: %v", rel, err)
	}
	defer f.Close()
	sum := alg.New()
	if _, err := io.Copy(sum, f); err != nil {
		h.t.Fatal(err)
	}
	return alg.Format(sum.Sum(nil))
}

// restoringWorkspace is the workspace of sandbox.box while the state
// records it as restoring ("" otherwise).
func (h *harness) restoringWorkspace() string {
	st := h.readState()
	if st == nil || st.Sandboxes["sandbox.box"] == nil || st.Sandboxes["sandbox.box"].RestorePending == nil {
		return ""
	}
	return filepath.Join(st.Sandboxes["sandbox.box"].Session.ID, "workspace")
}

func TestCrashDuringRestore(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(restoreJobConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	h.mustRun("apply", "-auto-approve", "-no-color")
	good := h.tree(h.workspace())
	if good["zz-last"] == "" || good["abslink"] != "link /etc/passwd" || len(good) < restoreFiles+5 {
		t.Fatalf("the run did not make the expected workspace: %d entries", len(good))
	}
	goodSum, recorded := h.snapshotSum()
	if goodSum != recorded {
		t.Fatalf("snapshot file digest %s, state records %s", goodSum, recorded)
	}

	// Each kill point is a condition on what a restore has visibly done.
	points := []struct {
		name string
		hit  func() bool
	}{
		{"the state records the restore", func() bool { return h.restoringWorkspace() != "" }},
		{"a quarter of the files are back", func() bool {
			ws := h.restoringWorkspace()
			_, err := os.Stat(filepath.Join(ws, "data", fmt.Sprintf("f%04d", restoreFiles/4)))
			return ws != "" && err == nil
		}},
		{"most files are back", func() bool {
			ws := h.restoringWorkspace()
			_, err := os.Stat(filepath.Join(ws, "data", fmt.Sprintf("f%04d", restoreFiles*7/8)))
			return ws != "" && err == nil
		}},
	}
	for _, pt := range points {
		caught := false
		for attempt := 1; attempt <= 5 && !caught; attempt++ {
			// Lose the sandbox, as a machine cleanup would.
			if err := os.RemoveAll(h.readState().Sandboxes["sandbox.box"].Session.ID); err != nil {
				t.Fatal(err)
			}
			out := h.mustRun("plan", "-no-color")
			if !strings.Contains(out, "# sandbox.box will be restored from its snapshot") {
				t.Fatalf("plan after losing the sandbox:\n%s", out)
			}
			p := h.start("apply", "-auto-approve", "-no-color")
			h.waitUntil(pt.name+" (or apply to exit)", func() bool {
				select {
				case err := <-p.done:
					p.done <- err
					return true
				default:
				}
				return pt.hit()
			})
			p.kill(t)
			if h.readState().Sandboxes["sandbox.box"].RestorePending == nil {
				// The restore finished before the kill landed: try again.
				t.Logf("%s: attempt %d: the restore finished before the kill", pt.name, attempt)
				continue
			}
			caught = true
			ws := h.restoringWorkspace()
			t.Logf("%s: killed with %d of %d entries in the new workspace", pt.name, len(h.tree(ws)), len(good))

			out, errOut, code := h.run("plan", "-no-color", "-detailed-exitcode")
			if code != 2 || !strings.Contains(out, "# sandbox.box will be restored from its snapshot") ||
				!strings.Contains(out, "a previous restore did not finish: agentctl stopped during it") {
				t.Fatalf("plan after a kill during the restore: exit %d\n%s%s", code, out, errOut)
			}
			if strings.Contains(out, "run.job will be") {
				t.Fatalf("plan after a kill during the restore proposes to run run.job again:\n%s", out)
			}
			if sum, rec := h.snapshotSum(); sum != goodSum || rec != goodSum {
				t.Fatalf("after the kill the snapshot file is %s and the state records %s; want the good %s", sum, rec, goodSum)
			}
			show := h.mustRun("state", "show", "sandbox.box")
			if !strings.Contains(show, "restore_pending") {
				t.Fatalf("state show does not say the restore is pending:\n%s", show)
			}
		}
		if !caught {
			t.Fatalf("%s: every restore finished before the kill", pt.name)
		}
	}

	h.mustRun("apply", "-auto-approve", "-no-color")
	st := h.readState()
	if ss := st.Sandboxes["sandbox.box"]; ss.RestorePending != nil {
		t.Fatalf("sandbox.box after the final apply: restore_pending %+v", ss.RestorePending)
	}
	got := h.tree(h.workspace())
	if !maps.Equal(got, good) {
		var diff []string
		for _, k := range slices.Sorted(maps.Keys(good)) {
			if got[k] != good[k] {
				diff = append(diff, fmt.Sprintf("%s: %q, want %q", k, got[k], good[k]))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(got)) {
			if _, ok := good[k]; !ok {
				diff = append(diff, k+": not in the snapshot")
			}
		}
		t.Fatalf("the restored workspace differs from the snapshot's:\n%s", strings.Join(diff, "\n"))
	}
	if sum, rec := h.snapshotSum(); sum != goodSum || rec != goodSum {
		t.Fatalf("after the restore the snapshot file is %s and the state records %s; want the good %s", sum, rec, goodSum)
	}
	out, errOut, code := h.run("plan", "-no-color", "-detailed-exitcode")
	if code != 0 {
		t.Fatalf("plan after the restore: exit %d\n%s%s", code, out, errOut)
	}
	// Only the restored sandbox is left: every half-restored one is gone.
	ents, err := os.ReadDir(filepath.Join(h.stateDir(), "sandboxes"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) != 1 {
		t.Fatalf("sandbox directories after the restore: %v, want one", dirs)
	}
}
