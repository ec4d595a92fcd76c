package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statefile"
)

// sealedRuns writes, in an encrypted directory, a state with a run per
// address whose journal holds n records, and returns the journals'
// names by address. Each record says which run and step it is, so a
// record read in the wrong place shows.
func sealedRuns(t *testing.T, d *Dir, n int, addrs ...string) map[string]string {
	t.Helper()
	s, err := d.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, addr := range addrs {
		names[addr] = state.ScopedJournalName(s.Lineage, addr)
		s.Runs[addr] = &state.Run{Address: addr, Status: state.RunInterrupted, Journal: names[addr], Steps: n}
	}
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	for _, addr := range addrs {
		appendSteps(t, d, names[addr], addr, n)
	}
	return names
}

// appendSteps appends n records to the journal name.
func appendSteps(t *testing.T, d *Dir, name, addr string, n int) {
	t.Helper()
	j, err := d.OpenJournal(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range n {
		if err := j.Append(map[string]any{"run": addr, "step": i + 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// journalLines splits a journal file into its header and record lines
// (each with its newline).
func journalLines(t *testing.T, path string) []string {
	t.Helper()
	lines := strings.SplitAfter(string(mustRead(t, path)), "\n")
	return lines[:len(lines)-1]
}

// readRecords reads the journal name as a resumed run would, returning its
// records.
func readRecords(d *Dir, name string) ([]string, error) {
	var got []string
	_, err := d.ReadJournal(context.Background(), name, func(raw json.RawMessage) error {
		got = append(got, string(raw))
		return nil
	})
	return got, err
}

// wantMisplaced checks that err refuses the journal at path, naming it
// and the record, as a record that does not authenticate there.
func wantMisplaced(t *testing.T, err error, got []string, path string, record int) {
	t.Helper()
	if err == nil {
		t.Fatalf("the tampered journal was accepted; records read: %v", got)
	}
	msg := err.Error()
	if !errors.Is(err, seal.ErrDamaged) || !strings.Contains(msg, path) || !strings.Contains(msg, fmt.Sprintf("record %d", record)) {
		t.Fatalf("error %q: want seal.ErrDamaged naming %s and record %d", msg, path, record)
	}
}

func TestSealedJournalRecordsSwapped(t *testing.T) {
	d, _ := OpenDir(t.TempDir(), WithEncryption(testKeys(t, false)))
	name := sealedRuns(t, d, 3, "run.a")["run.a"]
	path := d.Abs(name)
	orig := journalLines(t, path)
	// Each line carries its own CRC, so whole lines moved keep valid
	// checksums: the attacker has nothing to recompute.
	swapped := []string{orig[0], orig[2], orig[1], orig[3]}
	if err := os.WriteFile(path, []byte(strings.Join(swapped, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readRecords(d, name)
	wantMisplaced(t, err, got, path, 1)
	// The journal is not appended to, or converted, either.
	if _, err := d.OpenJournal(context.Background(), name); err == nil {
		t.Error("OpenJournal accepted the swapped journal")
	}
}

func TestSealedJournalRecordDuplicated(t *testing.T) {
	d, _ := OpenDir(t.TempDir(), WithEncryption(testKeys(t, false)))
	name := sealedRuns(t, d, 3, "run.a")["run.a"]
	path := d.Abs(name)
	orig := journalLines(t, path)
	for what, lines := range map[string][]string{
		// The first record replayed as a fourth one...
		"appended": {orig[0], orig[1], orig[2], orig[3], orig[1]},
		// ...or in place of the last, where a record torn by a crash
		// would be ignored.
		"last replaced": {orig[0], orig[1], orig[2], orig[1]},
	} {
		t.Run(what, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readRecords(d, name)
			wantMisplaced(t, err, got, path, len(lines)-1)
		})
	}
}

func TestSealedJournalOfAnotherRun(t *testing.T) {
	d, _ := OpenDir(t.TempDir(), WithEncryption(testKeys(t, false)))
	names := sealedRuns(t, d, 2, "run.a", "run.b")
	if err := os.WriteFile(d.Abs(names["run.a"]), mustRead(t, d.Abs(names["run.b"])), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readRecords(d, names["run.a"])
	wantMisplaced(t, err, got, d.Abs(names["run.a"]), 1)
}

func TestSealedJournalOfAnotherState(t *testing.T) {
	// Two states encrypted with one key, each with a run.a whose journal
	// has the name runs had before names carried the lineage.
	keys := testKeys(t, false)
	var dirs [2]*Dir
	for i := range dirs {
		dirs[i], _ = OpenDir(t.TempDir(), WithEncryption(keys))
		s, _ := dirs[i].Read(context.Background())
		s.Runs["run.a"] = &state.Run{Address: "run.a", Status: state.RunInterrupted, Journal: state.JournalName("run.a"), Steps: 2}
		if err := dirs[i].Write(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		appendSteps(t, dirs[i], state.JournalName("run.a"), fmt.Sprintf("run.a of state %d", i), 2)
	}
	path := dirs[0].Abs(state.JournalName("run.a"))
	if err := os.WriteFile(path, mustRead(t, dirs[1].Abs(state.JournalName("run.a"))), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readRecords(dirs[0], state.JournalName("run.a"))
	wantMisplaced(t, err, got, path, 1)
}

func TestSealedStateLogRecordsSwapped(t *testing.T) {
	d, _ := OpenDir(t.TempDir(), WithEncryption(testKeys(t, false)))
	sealedRuns(t, d, 1, "run.a")
	s, _ := d.Read(context.Background())
	for _, status := range []string{state.RunRunning, state.RunCompleted} {
		s.Runs["run.a"].Status = status
		if err := d.Append(context.Background(), s, state.RunRef("run.a")); err != nil {
			t.Fatal(err)
		}
	}
	d.closeLog()
	lines := journalLines(t, d.LogFile())
	if err := os.WriteFile(d.LogFile(), []byte(lines[0]+lines[2]+lines[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Read(context.Background()); err == nil || !strings.Contains(err.Error(), d.LogFile()) {
		t.Fatalf("Read of the swapped state log: %v", err)
	}
}

// TestSealedJournalRecordRecomputedCRC edits a record and recomputes its
// CRC, as an attacker would: the CRC is no authentication.
func TestSealedJournalRecordRecomputedCRC(t *testing.T) {
	d, _ := OpenDir(t.TempDir(), WithEncryption(testKeys(t, false)))
	name := sealedRuns(t, d, 2, "run.a")["run.a"]
	path := d.Abs(name)
	lines := journalLines(t, path)
	data := []byte(strings.TrimSuffix(lines[2], "\n")[9:])
	env, err := seal.DecodeText(data)
	if err != nil {
		t.Fatal(err)
	}
	env[len(env)-1] ^= 1
	text := seal.EncodeText(env)
	lines[2] = fmt.Sprintf("%08x %s\n", crc32.Checksum(text, crc32.MakeTable(crc32.Castagnoli)), text)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readRecords(d, name)
	wantMisplaced(t, err, got, path, 2)
	if !bytes.Contains(mustRead(t, path), text) {
		t.Error("the journal was changed by the read")
	}
}

// legacyKey is the key of the encrypted directories of statefile's
// testdata/formats; format2-encrypted-unbound is a state directory
// written encrypted by agentctl before records were bound to their
// places (version 1 envelopes, version 2 journals).
const legacyKey = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA="

// legacyDir copies that directory into one of its own.
func legacyDir(t *testing.T) (*Dir, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../statefile/testdata/formats/format2-encrypted-unbound")); err != nil {
		t.Fatal(err)
	}
	k, err := seal.ParseKey(legacyKey)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir, WithEncryption(seal.NewKeys(k, false)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Read(context.Background())
	if err != nil {
		t.Fatalf("the state encrypted before places were bound: %v", err)
	}
	r := s.Runs["run.a"]
	if r == nil || r.Error != "legacy change" || r.Journal == "" {
		t.Fatalf("run.a read back as %+v", r)
	}
	return d, r.Journal
}

func wantSteps(t *testing.T, d *Dir, name string, n int) {
	t.Helper()
	got, err := readRecords(d, name)
	if err != nil || len(got) != n {
		t.Fatalf("journal %s: %v, %v; want %d records", name, got, err, n)
	}
}

func TestLegacyEncryptedStateLoads(t *testing.T) {
	d, name := legacyDir(t)
	wantSteps(t, d, name, 3)
	legacy := mustRead(t, d.Abs(name))
	// The next whole write binds the state and its journals.
	s, _ := d.Read(context.Background())
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if head := journalLines(t, d.Abs(name))[0]; !strings.HasPrefix(head, "AGENTCTL-JOURNAL 3 ") {
		t.Fatalf("the journal was not converted: header %q", head)
	}
	wantSteps(t, d, name, 3)
	other, _ := OpenDir(d.Path(), WithEncryption(d.Encryption()))
	wantSteps(t, other, name, 3)
	// From then on, a journal in the earlier form was put there: the
	// legacy copy, or a plaintext one.
	plainPath := filepath.Join(t.TempDir(), "plain.jsonl")
	pj, err := statefile.OpenJournal(plainPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := pj.Append(json.RawMessage(`{"step":1,"text":"forged"}`)); err != nil {
		t.Fatal(err)
	}
	pj.Close()
	plain := string(mustRead(t, plainPath))
	for what, data := range map[string]string{"legacy": string(legacy), "plaintext": plain} {
		t.Run(what, func(t *testing.T) {
			if err := os.WriteFile(d.Abs(name), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, dd := range []*Dir{d, other} {
				got, err := readRecords(dd, name)
				if err == nil || !strings.Contains(err.Error(), d.Abs(name)) || !strings.Contains(err.Error(), "put back the journal") {
					t.Fatalf("a %s journal under a bound state: %v, %v", what, got, err)
				}
				if _, err := dd.OpenJournal(context.Background(), name); err == nil {
					t.Fatalf("OpenJournal of a %s journal under a bound state", what)
				}
			}
		})
	}
}

func TestLegacyEncryptedJournalResumed(t *testing.T) {
	d, name := legacyDir(t)
	// A resumed run appends to its journal: it is rewritten bound first.
	appendSteps(t, d, name, "run.a", 1)
	if head := journalLines(t, d.Abs(name))[0]; !strings.HasPrefix(head, "AGENTCTL-JOURNAL 3 ") {
		t.Fatalf("the journal was not converted: header %q", head)
	}
	wantSteps(t, d, name, 4)
}

// TestOldFormatDirectoriesLoad: a state directory of every format an
// agentctl has written (statefile's testdata/formats) is read, its
// run's journal too, and the next whole write brings it to this
// version's format, which reads back.
func TestOldFormatDirectoriesLoad(t *testing.T) {
	k, err := seal.ParseKey(legacyKey)
	if err != nil {
		t.Fatal(err)
	}
	src := "../statefile/testdata/formats"
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(src, e.Name()))); err != nil {
				t.Fatal(err)
			}
			var keys *seal.Keys
			if strings.Contains(e.Name(), "encrypted") {
				keys = seal.NewKeys(k, false)
			}
			d, err := OpenDir(dir, WithEncryption(keys))
			if err != nil {
				t.Fatal(err)
			}
			s, err := d.Read(context.Background())
			if err != nil || s.Runs["run.a"] == nil || s.Serial != 2 {
				t.Fatalf("Read: %v, %v", s, err)
			}
			wantSteps(t, d, s.Runs["run.a"].JournalFile(), 3)
			if err := d.Write(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			again, _ := OpenDir(dir, WithEncryption(keys))
			back, err := again.Read(context.Background())
			if err != nil || back.Serial != 3 {
				t.Fatalf("read after the write: %v, %v", back, err)
			}
			wantSteps(t, again, back.Runs["run.a"].JournalFile(), 3)
		})
	}
}
