package pgstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/internal/seal/sealtest"
	"github.com/agentctl/agentctl/state"
)

// sealedJournals writes, in an encrypted store, a state with a run per
// address whose journal (named after it) holds n records, each saying
// which run and step it is.
func sealedJournals(t *testing.T, s *Store, n int, addrs ...string) {
	t.Helper()
	st, err := s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range addrs {
		st.Runs[addr] = &state.Run{Address: addr, Status: "interrupted", Journal: "journals/" + addr + ".jsonl", Steps: n}
	}
	if err := s.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	for _, addr := range addrs {
		j, err := s.OpenJournal(context.Background(), "journals/"+addr+".jsonl")
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := j.Append(map[string]any{"run": addr, "step": i + 1}); err != nil {
				t.Fatal(err)
			}
		}
		j.Close()
	}
}

// copyRecord sets the record of the row (name, seq) of dst to that of
// the row (fromName, fromSeq) of src's tables, as someone with write
// access to the database would.
func copyRecord(t *testing.T, dst, src *Store, name string, seq int, fromName string, fromSeq int) {
	t.Helper()
	var rec []byte
	if err := src.pool.QueryRow(context.Background(), `SELECT record FROM `+src.t.records+` WHERE name = $1 AND seq = $2`, fromName, fromSeq).Scan(&rec); err != nil {
		t.Fatal(err)
	}
	tag, err := dst.pool.Exec(context.Background(), `UPDATE `+dst.t.records+` SET record = $1 WHERE name = $2 AND seq = $3`, rec, name, seq)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("update: %v, %v", tag, err)
	}
}

// wantRefused checks that reading the journal name fails naming it and
// the record, as a record that does not authenticate there.
func wantRefused(t *testing.T, s *Store, name string, record int) {
	t.Helper()
	var got []string
	_, err := s.ReadJournal(context.Background(), name, func(raw json.RawMessage) error {
		got = append(got, string(raw))
		return nil
	})
	if err == nil {
		t.Fatalf("the tampered journal was accepted; records read: %v", got)
	}
	msg := err.Error()
	if !errors.Is(err, seal.ErrDamaged) || !strings.Contains(msg, "journal "+name) || !strings.Contains(msg, fmt.Sprintf("record %d", record)) {
		t.Fatalf("error %q: want seal.ErrDamaged naming journal %s and record %d", msg, name, record)
	}
}

func TestSealedRowOfAnotherPosition(t *testing.T) {
	_, cfg := newStore(t)
	cfg.Encryption = testKeys(t, false)
	s := another(t, cfg)
	sealedJournals(t, s, 3, "run.a")
	copyRecord(t, s, s, "journals/run.a.jsonl", 2, "journals/run.a.jsonl", 1)
	wantRefused(t, s, "journals/run.a.jsonl", 2)
}

func TestSealedRowOfAnotherJournal(t *testing.T) {
	_, cfg := newStore(t)
	cfg.Encryption = testKeys(t, false)
	s := another(t, cfg)
	sealedJournals(t, s, 2, "run.a", "run.b")
	copyRecord(t, s, s, "journals/run.a.jsonl", 1, "journals/run.b.jsonl", 1)
	wantRefused(t, s, "journals/run.a.jsonl", 1)
}

func TestSealedRowOfAnotherState(t *testing.T) {
	// Two schemas (two states) encrypted with one key, with a journal of
	// the same name.
	keys := testKeys(t, false)
	var stores [2]*Store
	for i := range stores {
		_, cfg := newStore(t)
		cfg.Encryption = keys
		stores[i] = another(t, cfg)
		sealedJournals(t, stores[i], 2, "run.a")
	}
	copyRecord(t, stores[0], stores[1], "journals/run.a.jsonl", 2, "journals/run.a.jsonl", 2)
	wantRefused(t, stores[0], "journals/run.a.jsonl", 2)
}

func TestSealedRowRemoved(t *testing.T) {
	_, cfg := newStore(t)
	cfg.Encryption = testKeys(t, false)
	s := another(t, cfg)
	sealedJournals(t, s, 3, "run.a")
	if _, err := s.pool.Exec(context.Background(), `DELETE FROM `+s.t.records+` WHERE name = 'journals/run.a.jsonl' AND seq = 2`); err != nil {
		t.Fatal(err)
	}
	_, err := s.ReadJournal(context.Background(), "journals/run.a.jsonl", func(json.RawMessage) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "record 2") {
		t.Fatalf("a journal with its record 2 removed: %v", err)
	}
}

func TestSealedStateVersionOfAnotherSerial(t *testing.T) {
	_, cfg := newStore(t)
	cfg.Encryption = testKeys(t, false)
	s := another(t, cfg)
	sealedJournals(t, s, 1, "run.a")
	st, _ := s.Read(context.Background())
	st.Runs["run.a"].Status = "completed"
	if err := s.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	// The latest version's data replaced with the one before: the
	// state would go back while its serial says it did not.
	if _, err := s.pool.Exec(context.Background(), `UPDATE `+s.t.versions+` SET data = (SELECT data FROM `+s.t.versions+` WHERE serial = $1) WHERE serial = $2`, int64(st.Serial-1), int64(st.Serial)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read(context.Background()); err == nil {
		t.Fatalf("the state version of serial %d was read as serial %d", st.Serial-1, got.Serial)
	} else if !errors.Is(err, seal.ErrDamaged) || !strings.Contains(err.Error(), fmt.Sprint(st.Serial)) {
		t.Fatalf("error %q: want seal.ErrDamaged naming serial %d", err, st.Serial)
	}
}

// legacyRows are rows written encrypted by agentctl before rows were
// bound to their places (version 1 envelopes), with the key legacyKey.
type legacyRows struct {
	Lineage string   `json:"lineage"`
	Serial  int64    `json:"serial"`
	Version string   `json:"version"`
	Journal string   `json:"journal"`
	Records []string `json:"records"`
}

const legacyKey = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA="

// legacyStore returns a store holding testdata/legacy-rows.json.
func legacyStore(t *testing.T) (*Store, legacyRows) {
	t.Helper()
	data, err := os.ReadFile("testdata/legacy-rows.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows legacyRows
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	k, err := seal.ParseKey(legacyKey)
	if err != nil {
		t.Fatal(err)
	}
	_, cfg := newStore(t)
	cfg.Encryption = seal.NewKeys(k, false)
	s := another(t, cfg)
	ctx := context.Background()
	version, _ := hex.DecodeString(rows.Version)
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.t.versions+` (serial, lineage, agentctl_version, data) VALUES ($1, $2, 'old', $3)`, rows.Serial, rows.Lineage, version); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.t.journals+` (name) VALUES ($1)`, rows.Journal); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows.Records {
		rec, _ := hex.DecodeString(r)
		if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.t.records+` (name, seq, record) VALUES ($1, $2, $3)`, rows.Journal, i+1, rec); err != nil {
			t.Fatal(err)
		}
	}
	return s, rows
}

func readAll(t *testing.T, s *Store, name string) []string {
	t.Helper()
	var got []string
	if _, err := s.ReadJournal(context.Background(), name, func(raw json.RawMessage) error {
		got = append(got, string(raw))
		return nil
	}); err != nil {
		t.Fatalf("journal %s: %v", name, err)
	}
	return got
}

func TestLegacyEncryptedRowsLoad(t *testing.T) {
	s, rows := legacyStore(t)
	st, err := s.Read(context.Background())
	if err != nil {
		t.Fatalf("the state encrypted before rows were bound: %v", err)
	}
	if st.Lineage != rows.Lineage || st.Runs["run.a"] == nil {
		t.Fatalf("read back %+v", st)
	}
	if got := readAll(t, s, rows.Journal); len(got) != 2 {
		t.Fatalf("journal: %v", got)
	}
	// Appended before the next whole write: a bound record after the
	// legacy ones.
	j, err := s.OpenJournal(context.Background(), rows.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(map[string]any{"step": 3}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, rows.Journal); len(got) != 3 {
		t.Fatalf("journal: %v", got)
	}
	// The whole write binds every row.
	if err := s.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	for table, col := range map[string]string{s.t.versions: "data", s.t.records: "record"} {
		var n int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE substring(`+col+` from 1 for 5) <> '\x0041435302'::bytea`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows not bound, %v", table, n, err)
		}
	}
	if got := readAll(t, s, rows.Journal); len(got) != 3 || !strings.Contains(got[0], "legacy step") {
		t.Fatalf("journal after the conversion: %v", got)
	}
	// From then on, a legacy row put back is refused.
	legacy, _ := hex.DecodeString(rows.Records[0])
	if _, err := s.pool.Exec(context.Background(), `UPDATE `+s.t.records+` SET record = $1 WHERE name = $2 AND seq = 1`, legacy, rows.Journal); err != nil {
		t.Fatal(err)
	}
	_, err = s.ReadJournal(context.Background(), rows.Journal, func(json.RawMessage) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "record 1 is not encrypted with its place") {
		t.Fatalf("a legacy row under a bound state: %v", err)
	}
}

func testKeys(t testing.TB, decrypt bool) *seal.Keys {
	t.Helper()
	k, _ := sealtest.NewKey(t)
	return seal.NewKeys(k, decrypt)
}
