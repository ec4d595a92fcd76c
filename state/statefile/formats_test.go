package statefile

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
)

// formatsKey is the key of the encrypted directories of testdata/formats.
const formatsKey = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA="

// loadDir reads a state directory the way the local store does, with
// this package alone: the state file, the changes of its log, and the
// journal of each run.
func loadDir(t *testing.T, dir string, keys *seal.Keys) (*state.State, map[string][]json.RawMessage) {
	t.Helper()
	name := filepath.Join(dir, "state.json")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	s, form, err := DecodeStateFile(keys, name, data)
	if err != nil {
		t.Fatalf("the state file: %v", err)
	}
	sb := StateBinding{Lineage: s.Lineage, Strict: form == FormBound && keys.Encrypting()}
	if _, err := ReadSealedJournal(name+".log", keys, KindStateLog, FixedBinding(StateLogName, sb), func(raw json.RawMessage) error {
		_, err := ApplyRecord(s, raw)
		return err
	}); err != nil {
		t.Fatalf("the state log: %v", err)
	}
	if err := CheckState(name, s); err != nil {
		t.Fatal(err)
	}
	journals := map[string][]json.RawMessage{}
	for addr, r := range s.Runs {
		bind := FixedBinding(path.Clean(r.JournalFile()), sb)
		if _, err := ReadSealedJournal(filepath.Join(dir, filepath.FromSlash(r.JournalFile())), keys, KindJournal, bind, func(raw json.RawMessage) error {
			journals[addr] = append(journals[addr], raw)
			return nil
		}); err != nil {
			t.Fatalf("the journal of %s: %v", addr, err)
		}
	}
	return s, journals
}

// TestOldFormatsLoad reads a state directory of every format an
// agentctl has written (testdata/formats/README.md says which).
func TestOldFormatsLoad(t *testing.T) {
	k, err := seal.ParseKey(formatsKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir       string
		encrypted bool
		digests   digest.Algorithm
		// change is what the log's change made of run.a.
		change func(r *state.Run) bool
	}{
		{"format1-plain", false, digest.SHA256, generated},
		{"format1-encrypted-unbound", true, digest.SHA256, generated},
		{"format2-plain", false, digest.BLAKE3, generated},
		{"format2-encrypted-unbound", true, digest.BLAKE3, func(r *state.Run) bool { return r.Error == "legacy change" }},
		{"format2-encrypted-bound", true, digest.BLAKE3, generated},
	} {
		t.Run(c.dir, func(t *testing.T) {
			var keys *seal.Keys
			if c.encrypted {
				keys = seal.NewKeys(k, false)
			}
			s, journals := loadDir(t, filepath.Join("testdata", "formats", c.dir), keys)
			if s.Digests() != c.digests {
				t.Errorf("digests %s, want %s", s.Digests(), c.digests)
			}
			r := s.Runs["run.a"]
			if r == nil || !c.change(r) || s.Serial != 2 {
				t.Fatalf("run.a %+v at serial %d: the log's change is not applied", r, s.Serial)
			}
			if n := len(journals["run.a"]); n != 3 {
				t.Fatalf("run.a's journal holds %d records, want 3", n)
			}
			// What loads writes back, in the format of its digests.
			data, err := EncodeStateVersion(s, "")
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeStateVersion("state.json", data)
			if err != nil || back.WrittenFormat() != s.WrittenFormat() {
				t.Fatalf("written back: format %d, %v", back.WrittenFormat(), err)
			}
		})
	}
}

// generated is the change recorded in the log of the directories written
// for these tests (every one but format2-encrypted-unbound).
func generated(r *state.Run) bool {
	return r.Status == state.RunCompleted && string(r.Output) == `{"verdict":"old format"}`
}
