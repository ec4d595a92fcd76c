package statefile

import (
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/internal/seal/sealtest"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statetest"
)

// memFile stands for a state file in the tests: write encodes a state
// into it, read decodes it (a new state before the first write).
type memFile struct{ data []byte }

func (m *memFile) write(t *testing.T, s *state.State) {
	t.Helper()
	data, err := EncodeStateVersion(s, "")
	if err != nil {
		t.Fatal(err)
	}
	m.data = data
}

func (m *memFile) read(t *testing.T) *state.State {
	t.Helper()
	if m.data == nil {
		return state.New()
	}
	s, err := DecodeStateVersion("state.json", m.data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testKeys(t testing.TB, decrypt bool) *seal.Keys {
	t.Helper()
	k, _ := sealtest.NewKey(t)
	return seal.NewKeys(k, decrypt)
}

// testBinding binds a journal of the tests to a state of its own.
var testBinding = FixedBinding("journals/j.jsonl", StateBinding{Lineage: "0e5b8c1a-test"})

func FuzzReadState(f *testing.F) {
	good, _ := encodeState(statetest.Sample())
	f.Add(good)
	f.Add([]byte(`{"format_version":1,"lineage":"l"}`))
	f.Add([]byte(`{"format_version":2,"lineage":"l"}`))
	f.Add([]byte(`{"format_version":1,"lineage":"l","runs":{"run.a":null}}`))
	f.Add([]byte(`{"format_version":1,"lineage":"l","outputs":{"o":{"value":[1, 2]}}}`))
	f.Add([]byte(`{"format_version":1,"lineage":"l","serial":-1}`))
	f.Add([]byte(`{"format_version":1e400}`))
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeState("state.json", data)
		if err != nil {
			if s != nil {
				t.Fatal("state and error both returned")
			}
			if !strings.Contains(err.Error(), "state.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if s.Lineage == "" || s.Runs == nil || s.Sandboxes == nil || s.Outputs == nil || s.FormatVersion > state.FormatVersion {
			t.Fatalf("accepted an invalid state: %+v", s)
		}
		// Whatever was accepted writes back and reads back the same.
		m1, err := encodeState(s)
		if err != nil {
			t.Fatalf("accepted state does not encode: %v", err)
		}
		s2, err := decodeState("state.json", m1)
		if err != nil {
			t.Fatalf("re-reading a written state: %v\n%s", err, m1)
		}
		m2, err := encodeState(s2)
		if err != nil {
			t.Fatal(err)
		}
		if string(m1) != string(m2) {
			t.Fatalf("not stable:\n%s\n%s", m1, m2)
		}
	})
}

// TestToolDecisionsInTheStateFile: standing decisions are written and
// read back; a state written before them reads without any; a damaged
// decision is an error naming the run and the tool.
func TestToolDecisionsInTheStateFile(t *testing.T) {
	var f memFile
	s := state.New()
	r := &state.Run{Address: "run.a", Status: state.RunAwaitingApproval}
	r.SetToolDecision("exec_command", state.ToolDecision{Decision: state.ApprovalApproved, DecidedBy: "alice", DecidedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	s.Runs["run.a"] = r
	f.write(t, s)
	got := f.read(t)
	if g := got.Runs["run.a"].ToolDecisions["exec_command"]; g != r.ToolDecisions["exec_command"] {
		t.Errorf("read back %+v", g)
	}

	old, err := decodeState("state.json", []byte(`{"format_version":1,"lineage":"l","runs":{"run.a":{"status":"awaiting_approval","approvals":[{"call_id":"c","tool":"exec_command"}]}}}`))
	if err != nil || old.Runs["run.a"].ToolDecisions != nil {
		t.Errorf("a state without tool_decisions: %v, %v", err, old)
	}

	_, err = decodeState("state.json", []byte(`{"format_version":1,"lineage":"l","runs":{"run.a":{"tool_decisions":{"exec_command":{"decision":"maybe"}}}}}`))
	if err == nil || !strings.Contains(err.Error(), `state.json: runs["run.a"]: tool_decisions["exec_command"] has decision "maybe"`) {
		t.Errorf("a damaged decision: %v", err)
	}
}

// canary is a value no file written encrypted may hold in plaintext.
const canary = "canary-7f3a9c-do-not-leak"
