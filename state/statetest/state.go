package statetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/state"
)

var stateTests = []subtest{
	{"an empty store reads as a new state", func(t *testing.T, h Harness) {
		st := read(t, h.Open(t, nil))
		if st.Serial != 0 || st.Lineage == "" || st.FormatVersion != state.FormatVersion {
			t.Fatalf("empty store: serial %d, lineage %q, format %d; want serial 0, a lineage, format %d", st.Serial, st.Lineage, st.FormatVersion, state.FormatVersion)
		}
		if st.Sandboxes == nil || st.Runs == nil || st.Outputs == nil {
			t.Fatalf("empty store: nil maps in %+v", st)
		}
	}},
	{"a state written whole reads back the same from another client", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		st := sample()
		write(t, s, st)
		if st.Serial != 1 {
			t.Fatalf("serial after the first write: %d, want 1", st.Serial)
		}
		back := read(t, h.Open(t, nil))
		if diff := cmp.Diff(st, back); diff != "" {
			t.Fatalf("read back (-written +read):\n%s", diff)
		}
	}},
	{"every whole write increments the serial by one", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		st := sample()
		for want := uint64(1); want <= 3; want++ {
			write(t, s, st)
			if st.Serial != want {
				t.Fatalf("serial %d after write %d", st.Serial, want)
			}
		}
		if back := read(t, h.Open(t, nil)); back.Serial != 3 || back.Lineage != st.Lineage {
			t.Fatalf("read back serial %d of lineage %s, want 3 of %s", back.Serial, back.Lineage, st.Lineage)
		}
	}},
	{"a state without a lineage is refused and nothing is written", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		err := s.Write(ctx(t), &state.State{})
		wantContains(t, "writing a state without a lineage", err, "no lineage")
		if st := read(t, s); st.Serial != 0 {
			t.Fatalf("a refused write left serial %d", st.Serial)
		}
	}},
}

var changeTests = []subtest{
	{"an append records the objects it names and increments the serial", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		st := sample()
		write(t, s, st)
		st.Runs[`run.review["pricing"]`].Status = state.RunFailed
		st.Runs[`run.review["pricing"]`].Error = "boom"
		st.Sandboxes["sandbox.new"] = &state.Sandbox{Address: "sandbox.new", Kind: "local", Status: state.SandboxStopped}
		if err := s.Append(ctx(t), st, state.RunRef(`run.review["pricing"]`), state.SandboxRef("sandbox.new")); err != nil {
			t.Fatal(err)
		}
		if st.Serial != 2 {
			t.Fatalf("serial after an append: %d, want 2", st.Serial)
		}
		back := read(t, h.Open(t, nil))
		if diff := cmp.Diff(st, back); diff != "" {
			t.Fatalf("read back after an append (-appended +read):\n%s", diff)
		}
	}},
	{"an append of a removed object removes it", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		st := sample()
		write(t, s, st)
		delete(st.Sandboxes, "sandbox.dev")
		delete(st.Chats, "chat.help")
		if err := s.Append(ctx(t), st, state.SandboxRef("sandbox.dev"), state.ChatRef("chat.help")); err != nil {
			t.Fatal(err)
		}
		back := read(t, h.Open(t, nil))
		if back.Sandboxes["sandbox.dev"] != nil || back.Chats["chat.help"] != nil {
			t.Fatalf("removed objects read back: sandbox %+v, chat %+v", back.Sandboxes["sandbox.dev"], back.Chats["chat.help"])
		}
		if back.Serial != 2 {
			t.Fatalf("serial %d, want 2", back.Serial)
		}
	}},
	{"chats, memories and outputs are recorded by append", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		st := sample()
		write(t, s, st)
		st.Chats["chat.help"].Turns = 9
		key := state.MemoryKey("capability.memory.notes", "sandbox.dev")
		st.Memories[key].Extracted = 4
		st.Outputs["count"] = &state.Output{Value: []byte(`3`), Sensitive: true}
		if err := s.Append(ctx(t), st, state.ChatRef("chat.help"), state.MemoryRef(key), state.OutputsRef()); err != nil {
			t.Fatal(err)
		}
		back := read(t, h.Open(t, nil))
		if diff := cmp.Diff(st, back); diff != "" {
			t.Fatalf("read back (-appended +read):\n%s", diff)
		}
	}},
	{"an append to a state never written writes it whole", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		st := read(t, s)
		st.Runs["run.a"] = &state.Run{Address: "run.a", Status: state.RunRunning}
		if err := s.Append(ctx(t), st, state.RunRef("run.a")); err != nil {
			t.Fatal(err)
		}
		back := read(t, h.Open(t, nil))
		if back.Serial != 1 || back.Lineage != st.Lineage || back.Runs["run.a"] == nil {
			t.Fatalf("read back serial %d lineage %s runs %v; want serial 1 of %s with run.a", back.Serial, back.Lineage, back.Runs, st.Lineage)
		}
	}},
	{"changes appended under the lock are whole after its release", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		l := lock(t, s, "apply")
		st := sample()
		write(t, s, st)
		for i := range 5 {
			st.Runs[`run.review["pricing"]`].Turns = 10 + i
			if err := s.Append(ctx(t), st, state.RunRef(`run.review["pricing"]`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Unlock(ctx(t)); err != nil {
			t.Fatalf("Unlock (compacting the changes): %v", err)
		}
		back := read(t, h.Open(t, nil))
		// The release may compact the changes into a whole write of its
		// own, which counts.
		if back.Serial < st.Serial {
			t.Fatalf("serial %d after the release, want at least %d", back.Serial, st.Serial)
		}
		st.Serial = back.Serial
		if diff := cmp.Diff(st, back); diff != "" {
			t.Fatalf("read back after the release (-appended +read):\n%s", diff)
		}
		// The next whole write continues the serials.
		before := back.Serial
		write(t, s, back)
		if back.Serial != before+1 {
			t.Fatalf("serial after a whole write following serial %d: %d", before, back.Serial)
		}
	}},
}
