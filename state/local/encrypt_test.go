package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/internal/seal/sealtest"
	"github.com/agentctl/agentctl/state"
)

const canary = "canary-7f3a9c-do-not-leak"

func testKeys(t testing.TB, decrypt bool) *seal.Keys {
	t.Helper()
	k, _ := sealtest.NewKey(t)
	return seal.NewKeys(k, decrypt)
}

// assertNoCanary fails when any file under dir holds canary.
func assertNoCanary(t *testing.T, dir string) {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if bytes.Contains(data, []byte(canary)) {
			t.Errorf("%s holds the plaintext canary", p)
		}
		return nil
	})
	if n == 0 {
		t.Fatalf("no files in %s", dir)
	}
}

// snapshotFiles returns the content of every file under dir.
func snapshotFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			data, _ := os.ReadFile(p)
			m[p] = string(data)
		}
		return err
	})
	return m
}

// fill writes a state with a run whose output and journal hold canary,
// and appends a change holding it too.
func fill(t *testing.T, d *Dir) {
	t.Helper()
	s, err := d.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.Runs["run.a"] = &state.Run{Address: "run.a", Status: state.RunRunning, Journal: state.JournalName("run.a")}
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	j, err := d.OpenJournal(context.Background(), state.JournalName("run.a"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := j.Append(map[string]any{"step": i + 1, "text": canary}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	s.Runs["run.a"].Status = state.RunCompleted
	s.Runs["run.a"].Output = json.RawMessage(`"` + canary + `"`)
	if err := d.Append(context.Background(), s, state.RunRef("run.a")); err != nil {
		t.Fatal(err)
	}
}

func checkFilled(t *testing.T, d *Dir) {
	t.Helper()
	s, err := d.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Runs["run.a"]; r == nil || string(r.Output) != `"`+canary+`"` {
		t.Fatalf("run.a read back as %+v", r)
	}
	n, err := d.ReadJournal(context.Background(), state.JournalName("run.a"), func(raw json.RawMessage) error {
		if !strings.Contains(string(raw), canary) {
			t.Errorf("journal record %s", raw)
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("journal: %d records, %v", n, err)
	}
}

// TestEncryptedJournalNotOpenedWithoutTheKey: a client without the key,
// or with another, cannot open an encrypted journal for appending (where
// it would write records the others refuse), and the refusal changes no
// file.
func TestEncryptedJournalNotOpenedWithoutTheKey(t *testing.T) {
	dir := t.TempDir()
	d, _ := OpenDir(dir, WithEncryption(testKeys(t, false)))
	fill(t, d)
	before := snapshotFiles(t, dir)
	for name, keys := range map[string]*seal.Keys{"no key": nil, "wrong key": testKeys(t, false)} {
		want := seal.ErrNoKey
		if keys != nil {
			want = seal.ErrWrongKey
		}
		other, _ := OpenDir(dir, WithEncryption(keys))
		if _, err := other.OpenJournal(context.Background(), state.JournalName("run.a")); !errors.Is(err, want) {
			t.Errorf("%s: OpenJournal: %v, want %v", name, err, want)
		}
		if _, err := other.Read(context.Background()); !errors.Is(err, want) || !strings.Contains(err.Error(), other.StateFile()) {
			t.Errorf("%s: Read: %v, want %v naming %s", name, err, want, other.StateFile())
		}
	}
	after := snapshotFiles(t, dir)
	if len(after) != len(before) {
		t.Fatalf("files changed: %d, then %d", len(before), len(after))
	}
	for p, c := range before {
		if after[p] != c {
			t.Errorf("%s changed", p)
		}
	}
}

func TestEncryptionMigration(t *testing.T) {
	t.Setenv("AGENTCTL_STATE_VERIFY", "1")
	dir := t.TempDir()
	plain, _ := OpenDir(dir)
	fill(t, plain)
	// A snapshot written before the key was set.
	s0, _ := plain.Read(context.Background())
	os.MkdirAll(filepath.Join(dir, "snapshots"), 0o700)
	snap := "snapshots/sandbox.b@1.tar"
	if err := os.WriteFile(plain.Abs(snap), []byte("tar bytes "+canary), 0o600); err != nil {
		t.Fatal(err)
	}
	s0.Sandboxes["sandbox.b"] = &state.Sandbox{Address: "sandbox.b", Snapshot: snap}
	if err := plain.Append(context.Background(), s0, state.SandboxRef("sandbox.b")); err != nil {
		t.Fatal(err)
	}
	keys := testKeys(t, false)
	enc, _ := OpenDir(dir, WithEncryption(keys))
	// Read as it is, with the key configured.
	checkFilled(t, enc)
	s, _ := enc.Read(context.Background())
	if err := enc.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	checkFilled(t, enc)
	assertNoCanary(t, dir)
	if _, err := plain.Read(context.Background()); !errors.Is(err, seal.ErrNoKey) {
		t.Errorf("read without the key after migration: %v", err)
	}
	if _, err := os.Stat(plain.BackupFile()); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.decodeStateFile(plain.BackupFile(), mustRead(t, plain.BackupFile())); !errors.Is(err, seal.ErrNoKey) {
		t.Errorf("the backup should be encrypted: %v", err)
	}

	// Removing the key is refused until decrypt = true decrypts.
	dec, _ := OpenDir(dir, WithEncryption(seal.NewKeys(keys.Key(), true)))
	checkFilled(t, dec)
	s, _ = dec.Read(context.Background())
	if err := dec.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	checkFilled(t, plain)
	for _, p := range []string{plain.StateFile(), plain.BackupFile(), plain.JournalPath("run.a"), plain.Abs(snap)} {
		if !bytes.Contains(mustRead(t, p), []byte(canary)) {
			t.Errorf("%s is not plaintext after decrypt", p)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
