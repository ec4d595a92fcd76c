package local

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statetest"
)

// stateWithRuns is sampleState with runs more runs like its own.
func stateWithRuns(runs int) *state.State {
	s := statetest.Sample()
	tmpl := s.Runs[`run.review["pricing"]`]
	for i := range runs {
		r := *tmpl
		r.Address = fmt.Sprintf("run.r%d", i)
		s.Runs[r.Address] = &r
	}
	return s
}

// BenchmarkStateWrite shows what a checkpoint would cost if it rewrote
// state.json instead of appending to a journal: it grows with the state.
func BenchmarkStateWrite(b *testing.B) {
	for _, runs := range []int{10, 1000} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			d, err := OpenDir(filepath.Join(b.TempDir(), ".agentctl"))
			if err != nil {
				b.Fatal(err)
			}
			s := stateWithRuns(runs)
			for b.Loop() {
				if err := d.Write(context.Background(), s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStateAppend is what a run's status change costs now: one
// record of that run appended to the state log, whatever the state holds.
func BenchmarkStateAppend(b *testing.B) {
	for _, runs := range []int{10, 1000} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			d, err := OpenDir(filepath.Join(b.TempDir(), ".agentctl"))
			if err != nil {
				b.Fatal(err)
			}
			s := stateWithRuns(runs)
			if err := d.Write(context.Background(), s); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				s.Runs["run.r1"].Turns = i
				if err := d.Append(context.Background(), s, state.RunRef("run.r1")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
