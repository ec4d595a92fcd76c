package main

import (
	"bytes"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/internal/seal/sealtest"
)

// encrypt makes the harness's configuration encrypt its state with a
// new key, given to every command in AGENTCTL_STATE_KEY.
func (h *harness) encrypt() {
	h.t.Helper()
	k, key := sealtest.NewKey(h.t)
	h.keys = seal.NewKeys(k, false)
	h.env = append(h.env, "AGENTCTL_STATE_KEY="+key)
	cfg := "agentctl {\n  encryption {\n    key = env(\"AGENTCTL_STATE_KEY\")\n  }\n}\n" + pipelineConfig()
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(cfg), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// assertEncryptedAtRest fails when the state file, its log and backup,
// a journal or a snapshot holds one of texts in plaintext, and returns
// how many such files it checked.
func (h *harness) assertEncryptedAtRest(texts ...string) int {
	h.t.Helper()
	n := 0
	err := filepath.WalkDir(h.stateDir(), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.stateDir(), p)
		if e.IsDir() {
			// The local provider's sandboxes (their workspaces), logs
			// and caches are not what is encrypted.
			if rel == "sandboxes" || rel == "logs" || rel == "cache" || rel == "providers" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(rel, "state.json") && !strings.HasPrefix(rel, "journals") && !strings.HasPrefix(rel, "snapshots") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		for _, s := range texts {
			if bytes.Contains(data, []byte(s)) {
				h.t.Errorf("%s holds %q in plaintext", rel, s)
			}
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestEncryptedCrashAndResume is TestCrashBetweenSteps with the state
// encrypted: apply, kill -9 mid-run, plan and resume, and nothing the
// run wrote is in plaintext in the state, the journal or the snapshot.
func TestEncryptedCrashAndResume(t *testing.T) {
	h := newHarness(t)
	h.encrypt()
	p := h.start("apply", "-auto-approve", "-no-color")
	h.waitUntil("step 5 in log.txt", func() bool { return h.lastStep() >= 5 })
	p.kill(t)
	h.checkAfterCrash(true)
	if n := h.assertEncryptedAtRest("echo 'step 3'", "Run all the steps."); n < 2 {
		t.Fatalf("checked only %d files", n)
	}
	h.checkFinished()
	st := h.readState()
	if st.Sandboxes["sandbox.box"].Snapshot == "" {
		t.Fatal("no snapshot was taken")
	}
	if n := h.assertEncryptedAtRest("echo 'step 3'", finalAnswer, "a 24-step job", "step 24"); n < 3 {
		t.Fatalf("checked only %d files", n)
	}
	// Without the key, and with another one, the state is refused.
	for _, env := range []string{"AGENTCTL_STATE_KEY=", "AGENTCTL_STATE_KEY=" + base64.StdEncoding.EncodeToString(make([]byte, 32))} {
		h2 := *h
		h2.env = []string{env}
		out, errOut, code := h2.run("state", "list")
		if code == 0 || !strings.Contains(errOut, "encrypt") {
			t.Errorf("state list with %s: exit %d\n%s%s", strings.SplitN(env, "=", 2)[0]+"=...", code, out, errOut)
		}
		if k := strings.TrimPrefix(env, "AGENTCTL_STATE_KEY="); k != "" && strings.Contains(out+errOut, k) {
			t.Error("the key is printed")
		}
	}
}
