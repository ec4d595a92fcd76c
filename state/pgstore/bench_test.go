package pgstore

import (
	"context"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

// BenchmarkCheckpoint is the cost of one checkpointed step (a journal
// Append of a 2 KiB model turn, durable before it returns) on the local
// store (write + fsync) and on the pg backend (an INSERT committed on a
// server on this machine; add the network's round trip for a remote
// one), and of a state change (Append of one run).
func BenchmarkCheckpoint(b *testing.B) {
	rec := map[string]any{"step": 1, "kind": "model", "text": strings.Repeat("x", 2048)}
	stores := map[string]func(b *testing.B) state.Store{
		"local": func(b *testing.B) state.Store {
			d, err := local.OpenDir(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			return d
		},
		"pg": func(b *testing.B) state.Store {
			s, _ := newStore(b)
			return s
		},
	}
	for _, name := range []string{"local", "pg"} {
		b.Run("journal/"+name, func(b *testing.B) {
			s := stores[name](b)
			j, err := s.OpenJournal(context.Background(), "journals/bench.jsonl")
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			b.ResetTimer()
			for range b.N {
				if err := j.Append(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("state/"+name, func(b *testing.B) {
			s := stores[name](b)
			st, err := s.Read(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			st.Runs["run.a"] = &state.Run{Agent: "agent.x", Status: "running"}
			if err := s.Write(context.Background(), st); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				st.Runs["run.a"].Turns = i
				if err := s.Append(context.Background(), st, state.RunRef("run.a")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
