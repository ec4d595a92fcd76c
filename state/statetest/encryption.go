package statetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
)

// runJournal is the journal of sample's run.
const runJournal = "journals/review.jsonl"

// fill writes sample, its run's output and journal holding canary, to s.
func fill(t *testing.T, s state.Store) *state.State {
	t.Helper()
	st := sample()
	st.Runs[`run.review["pricing"]`].Output = json.RawMessage(`{"secret":"` + canary + `"}`)
	write(t, s, st)
	j, err := s.OpenJournal(ctx(t), runJournal)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 3 {
		if err := j.Append(step{N: i + 1, Text: canary}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// noCanary fails the test when the store keeps canary in plaintext.
func noCanary(t *testing.T, h Harness, when string) {
	t.Helper()
	raw := h.Raw(t)
	if len(raw) == 0 {
		t.Fatalf("%s: the store keeps nothing at rest", when)
	}
	if bytes.Contains(raw, []byte(canary)) {
		t.Fatalf("%s: the store keeps the canary in plaintext", when)
	}
}

// pending returns what the next write of s does to the stored encoding.
func pending(t *testing.T, s state.Store) string {
	t.Helper()
	r, ok := s.(state.EncodingReporter)
	if !ok {
		t.Fatalf("%T is not a state.EncodingReporter", s)
	}
	conv, err := r.PendingConversion(ctx(t))
	if err != nil {
		t.Fatalf("PendingConversion: %v", err)
	}
	return conv
}

var encryptionTests = []subtest{
	{"an encrypted store keeps no plaintext at rest", func(t *testing.T, h Harness) {
		k := keys(t, false)
		s := h.Open(t, k)
		l := lock(t, s, "apply")
		st := fill(t, s)
		st.Runs[`run.review["pricing"]`].Error = canary
		if err := s.Append(ctx(t), st, state.RunRef(`run.review["pricing"]`)); err != nil {
			t.Fatal(err)
		}
		noCanary(t, h, "after an append under the lock")
		if err := l.Unlock(ctx(t)); err != nil {
			t.Fatal(err)
		}
		noCanary(t, h, "after the lock's release")
		other := h.Open(t, k)
		if back := read(t, other); back.Runs[`run.review["pricing"]`].Error != canary {
			t.Fatalf("read back with the key: %+v", back.Runs[`run.review["pricing"]`])
		}
		if got := readSteps(t, other, runJournal); !slices.Equal(got, steps(1, 3)) {
			t.Fatalf("journal read back with the key: %v", got)
		}
	}},
	{"reading without the key, or with another, is refused and changes nothing", func(t *testing.T, h Harness) {
		fill(t, h.Open(t, keys(t, false)))
		before := h.Raw(t)
		defer func() {
			if !bytes.Equal(h.Raw(t), before) {
				t.Error("refused reads changed what the store keeps")
			}
		}()
		for _, c := range []struct {
			name string
			keys *seal.Keys
			want error
		}{{"no key", nil, seal.ErrNoKey}, {"another key", keys(t, false), seal.ErrWrongKey}} {
			s := h.Open(t, c.keys)
			if _, err := s.Read(ctx(t)); !errors.Is(err, c.want) {
				t.Errorf("%s: Read: %v, want %v", c.name, err, c.want)
			}
			if _, err := s.ReadJournal(ctx(t), runJournal, func(json.RawMessage) error { return nil }); !errors.Is(err, c.want) {
				t.Errorf("%s: ReadJournal: %v, want %v", c.name, err, c.want)
			}
		}
	}},
	{"a write without the key leaves the encrypted store as it was", func(t *testing.T, h Harness) {
		k := keys(t, false)
		st := fill(t, h.Open(t, k))
		before := h.Raw(t)
		for _, c := range []struct {
			name string
			keys *seal.Keys
		}{{"no key", nil}, {"another key", keys(t, false)}} {
			if err := h.Open(t, c.keys).Write(ctx(t), state.New()); err == nil {
				t.Errorf("%s: a write over the encrypted state succeeded", c.name)
			}
		}
		if !bytes.Equal(h.Raw(t), before) {
			t.Error("refused writes changed what the store keeps")
		}
		if diff := cmp.Diff(st, read(t, h.Open(t, k))); diff != "" {
			t.Fatalf("the state changed (-written +read):\n%s", diff)
		}
	}},
	{"a plaintext store is encrypted by its next write once a key is set", func(t *testing.T, h Harness) {
		fill(t, h.Open(t, nil))
		k := keys(t, false)
		s := h.Open(t, k)
		if conv := pending(t, s); conv != "encrypts" {
			t.Fatalf("PendingConversion: %q, want %q", conv, "encrypts")
		}
		st := read(t, s)
		write(t, s, st)
		noCanary(t, h, "after the write with a key")
		if conv := pending(t, h.Open(t, k)); conv != "" {
			t.Fatalf("PendingConversion after the write: %q, want none", conv)
		}
		if _, err := h.Open(t, nil).Read(ctx(t)); !errors.Is(err, seal.ErrNoKey) {
			t.Fatalf("reading without the key: %v, want seal.ErrNoKey", err)
		}
		if got := readSteps(t, h.Open(t, k), runJournal); !slices.Equal(got, steps(1, 3)) {
			t.Fatalf("the converted journal reads %v", got)
		}
	}},
	{"a store told to decrypt is written in plaintext again", func(t *testing.T, h Harness) {
		k := keys(t, false)
		fill(t, h.Open(t, k))
		s := h.Open(t, seal.NewKeys(k.Key(), true))
		if conv := pending(t, s); conv != "decrypts" {
			t.Fatalf("PendingConversion: %q, want %q", conv, "decrypts")
		}
		write(t, s, read(t, s))
		plain := h.Open(t, nil)
		if back := read(t, plain); !bytes.Contains(back.Runs[`run.review["pricing"]`].Output, []byte(canary)) {
			t.Fatalf("read back without a key: %s", back.Runs[`run.review["pricing"]`].Output)
		}
		if got := readSteps(t, plain, runJournal); !slices.Equal(got, steps(1, 3)) {
			t.Fatalf("the decrypted journal reads %v", got)
		}
	}},
}
