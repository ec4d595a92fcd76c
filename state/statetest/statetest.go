// Package statetest holds every state store to the same behaviour, the
// way testing/fstest.TestFS holds every fs.FS and Terraform's
// statemgr.TestFull every state manager: TestStore runs the promises of
// state.Store (the state and its changes, the lock, journals and their
// torn tails, snapshots, writers taking turns, encryption) as subtests
// named by the behaviour they check. The local directory store and the
// PostgreSQL store run it; their own tests keep only what is theirs.
package statetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/internal/seal/sealtest"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// Harness is what the suite needs of one store under test: a way to
// open it as several clients would, and the few things only the store
// can do to itself.
type Harness struct {
	// Open opens the store anew, as another agentctl process would (on
	// another machine, for a store that is shared): a client of its own
	// of the same storage, encrypting with keys (nil: none). Every call
	// reaches the same storage.
	Open func(t *testing.T, keys *seal.Keys) state.Store
	// LoseLock makes the holder of l, taken through s, lose its lock
	// without releasing it, as when its process is killed or its
	// connection to the store is cut: the lock is free for others, the
	// holder's record of itself (LockInfo) stays.
	LoseLock func(t *testing.T, s state.Store, l state.Lease)
	// Raw returns every byte the store keeps at rest (its files, its
	// rows), to look for plaintext in.
	Raw func(t *testing.T) []byte
	// TearJournal cuts the last record of the journal name in the middle,
	// as a crash during its append would. It is nil for a store that
	// commits each record whole, where a crash cannot tear one.
	TearJournal func(t *testing.T, name string)
}

// Factory returns the Harness of a new, empty store; each subtest gets
// a store of its own.
type Factory func(t *testing.T) Harness

// TestStore runs the suite against the stores factory makes.
func TestStore(t *testing.T, factory Factory) {
	t.Helper()
	for _, group := range []struct {
		name  string
		tests []subtest
	}{
		{"state", stateTests},
		{"changes", changeTests},
		{"lock", lockTests},
		{"journals", journalTests},
		{"snapshots", snapshotTests},
		{"concurrent writers", concurrencyTests},
		{"encryption", encryptionTests},
	} {
		t.Run(group.name, func(t *testing.T) {
			for _, st := range group.tests {
				t.Run(st.name, func(t *testing.T) {
					h := factory(t)
					if h.Open == nil || h.LoseLock == nil || h.Raw == nil {
						t.Fatal("statetest: the factory's Harness lacks Open, LoseLock or Raw")
					}
					st.run(t, h)
				})
			}
		})
	}
}

// subtest is one behaviour the suite checks.
type subtest struct {
	name string
	run  func(t *testing.T, h Harness)
}

// canary is a value no store may keep in plaintext once it encrypts.
const canary = "statetest-canary-5d1e0b-never-in-plaintext"

// keys returns new encryption keys; decrypt makes them the setting of a
// store told to decrypt what it holds.
func keys(t *testing.T, decrypt bool) *seal.Keys {
	t.Helper()
	k, _ := sealtest.NewKey(t)
	return seal.NewKeys(k, decrypt)
}

// ctx is the context of the suite's calls.
func ctx(t *testing.T) context.Context { return t.Context() }

// sample returns a new state holding a sandbox, a run, a chat, a memory
// and outputs, every kind of object a store records.
func sample() *state.State {
	s := state.New()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Sandboxes["sandbox.dev"] = &state.Sandbox{
		Address: "sandbox.dev", Provider: "sandbox_provider.local", Kind: "local",
		Session: sandbox.SessionState{Provider: "local", ID: "/tmp/x", Data: json.RawMessage(`{"k":1}`)},
		Status:  state.SandboxRunning, ManifestDigest: "blake3:aa",
		EntryDigests: map[string]string{"src/main.go": "blake3:bb"},
		Snapshot:     "snapshots/sandbox.dev.tar", CreatedAt: now, UpdatedAt: now,
	}
	s.Runs[`run.review["pricing"]`] = &state.Run{
		Address: `run.review["pricing"]`, Agent: "agent.reviewer", Status: state.RunCompleted,
		Digest: "blake3:ee", DigestInputs: map[string]string{"agent": "blake3:1"},
		Sandboxes: []string{"sandbox.dev"}, Output: json.RawMessage(`{"verdict":"ok"}`),
		Turns: 3, Usage: model.Usage{InputTokens: 100, OutputTokens: 20},
		Provenance: state.Provenance{ConfigDigest: "blake3:ff", Models: []string{"gpt-5"}, StartedAt: now, CompletedAt: now.Add(time.Minute)},
		Journal:    "journals/review.jsonl", Steps: 7,
	}
	s.Chats = map[string]*state.Chat{"chat.help": {Address: "chat.help", Agent: "agent.reviewer", Status: state.ChatIdle, Turns: 2, CreatedAt: now, UpdatedAt: now}}
	key := state.MemoryKey("capability.memory.notes", "sandbox.dev")
	s.Memories = map[string]*state.Memory{key: {Capability: "capability.memory.notes", Sandbox: "sandbox.dev", Journal: "journals/memory.jsonl", Phase1: []string{"r1"}}}
	s.Outputs["verdict"] = &state.Output{Value: json.RawMessage(`"ok"`)}
	return s
}

// read reads s's state, failing the test on an error.
func read(t *testing.T, s state.Store) *state.State {
	t.Helper()
	st, err := s.Read(ctx(t))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return st
}

// write writes st whole to s, failing the test on an error.
func write(t *testing.T, s state.Store, st *state.State) {
	t.Helper()
	if err := s.Write(ctx(t), st); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// lock takes s's lock for op, failing the test on an error; the lock is
// released when the test ends.
func lock(t *testing.T, s state.Store, op string) state.Lease {
	t.Helper()
	l, err := s.Lock(ctx(t), state.LockInfo{Operation: op}, 0)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	t.Cleanup(func() { l.Unlock(context.Background()) })
	return l
}

// wantContains fails the test when err is nil or its message lacks one
// of want.
func wantContains(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one saying %q", what, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}
