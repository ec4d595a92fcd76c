package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/internal/seal/sealtest"
	"github.com/agentctl/agentctl/state"
)

const canary = "canary-pg-5e1b-do-not-leak"

func testKeys(t testing.TB, decrypt bool) *seal.Keys {
	t.Helper()
	k, _ := sealtest.NewKey(t)
	return seal.NewKeys(k, decrypt)
}

// rowsWith counts the rows of the backend's tables whose bytes hold
// canary.
func rowsWith(t *testing.T, s *Store) map[string]int {
	t.Helper()
	found := map[string]int{}
	for table, col := range map[string]string{
		s.t.versions: "data", s.t.changes: "record", s.t.records: "record",
		s.t.lockInfo: "info::text::bytea", s.t.chunks: "data",
	} {
		rows, err := s.pool.Query(context.Background(), `SELECT `+col+` FROM `+table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(canary)) {
				found[table]++
			}
		}
		rows.Close()
	}
	return found
}

// fillStore writes a state, a change and a journal holding canary.
func fillStore(t *testing.T, s *Store) {
	t.Helper()
	st, err := s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.Runs["run.a"] = &state.Run{Agent: "agent.x", Status: "running", Output: json.RawMessage(`"` + canary + `"`)}
	if err := s.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	st.Runs["run.a"].Error = canary
	if err := s.Append(context.Background(), st, state.RunRef("run.a")); err != nil {
		t.Fatal(err)
	}
	j, err := s.OpenJournal(context.Background(), "journals/run.a.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := j.Append(map[string]any{"step": i + 1, "text": canary}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
}

func checkStore(t *testing.T, s *Store) {
	t.Helper()
	st, err := s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Runs["run.a"]; r == nil || r.Error != canary {
		t.Fatalf("run.a read back as %+v", r)
	}
	n, err := s.ReadJournal(context.Background(), "journals/run.a.jsonl", func(raw json.RawMessage) error {
		if !strings.Contains(string(raw), canary) {
			t.Errorf("record %s", raw)
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("journal: %d records, %v", n, err)
	}
}

func TestEncryptedRows(t *testing.T) {
	_, cfg := newStore(t)
	cfg.Encryption = testKeys(t, false)
	s := another(t, cfg)
	fillStore(t, s)
	checkStore(t, s)
	if f := rowsWith(t, s); len(f) > 0 {
		t.Errorf("plaintext canary in %v", f)
	}
	for name, keys := range map[string]*seal.Keys{"no key": nil, "wrong key": testKeys(t, false)} {
		want := seal.ErrNoKey
		if keys != nil {
			want = seal.ErrWrongKey
		}
		c := cfg
		c.Encryption = keys
		o := another(t, c)
		if _, err := o.Read(context.Background()); !errors.Is(err, want) {
			t.Errorf("%s: Read: %v", name, err)
		}
		if _, err := o.ReadJournal(context.Background(), "journals/run.a.jsonl", func(json.RawMessage) error { return nil }); !errors.Is(err, want) {
			t.Errorf("%s: ReadJournal: %v", name, err)
		}
		if err := o.Write(context.Background(), state.New()); !errors.Is(err, want) {
			t.Errorf("%s: Write over it: %v", name, err)
		}
	}
	checkStore(t, s)
}

func TestEncryptionMigrationRows(t *testing.T) {
	plain, cfg := newStore(t)
	fillStore(t, plain)
	if f := rowsWith(t, plain); f[plain.t.versions] == 0 || f[plain.t.records] != 2 {
		t.Fatalf("the unencrypted rows hold the canary in %v", f)
	}
	keys := testKeys(t, false)
	cfg.Encryption = keys
	enc := another(t, cfg)
	checkStore(t, enc) // read as written
	st, _ := enc.Read(context.Background())
	if err := enc.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	checkStore(t, enc)
	if f := rowsWith(t, enc); len(f) > 0 {
		t.Errorf("after the encrypted write, plaintext canary in %v", f)
	}
	if _, err := plain.Read(context.Background()); !errors.Is(err, seal.ErrNoKey) {
		t.Errorf("read without the key: %v", err)
	}
	// decrypt = true: the way back.
	cfg.Encryption = seal.NewKeys(keys.Key(), true)
	dec := another(t, cfg)
	st, _ = dec.Read(context.Background())
	if err := dec.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	checkStore(t, plain)
	if f := rowsWith(t, plain); f[plain.t.versions] == 0 || f[plain.t.records] != 2 {
		t.Errorf("after decrypt, the rows hold the canary in %v", f)
	}
}
