package statetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/state"
)

// step is a journal record of the tests.
type step struct {
	N    int    `json:"n"`
	Text string `json:"text,omitempty"`
}

// appendSteps opens the journal name of s and appends steps from to to.
func appendSteps(t *testing.T, s state.Store, name string, from, to int) {
	t.Helper()
	j, err := s.OpenJournal(ctx(t), name)
	if err != nil {
		t.Fatalf("OpenJournal: %v", err)
	}
	defer j.Close()
	for i := from; i <= to; i++ {
		if err := j.Append(step{N: i, Text: "line1\nline2 \"quoted\""}); err != nil {
			t.Fatalf("appending step %d: %v", i, err)
		}
	}
}

// readSteps reads the journal name of s, checking that the count it
// returns is the number of records passed on.
func readSteps(t *testing.T, s state.Store, name string) []int {
	t.Helper()
	var got []int
	n, err := s.ReadJournal(ctx(t), name, func(raw json.RawMessage) error {
		var st step
		if err := json.Unmarshal(raw, &st); err != nil {
			return err
		}
		got = append(got, st.N)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadJournal: %v", err)
	}
	if n != len(got) {
		t.Fatalf("ReadJournal returned %d for %d records", n, len(got))
	}
	return got
}

// steps returns from, ..., to.
func steps(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

const journal = "journals/run.a-0123456789ab.jsonl"

var journalTests = []subtest{
	{"appended records read back in order from another client", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		write(t, s, sample())
		appendSteps(t, s, journal, 1, 5)
		if got := readSteps(t, h.Open(t, nil), journal); !slices.Equal(got, steps(1, 5)) {
			t.Fatalf("read back %v, want %v", got, steps(1, 5))
		}
	}},
	{"a reopened journal continues its records", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		write(t, s, sample())
		appendSteps(t, s, journal, 1, 3)
		j, err := h.Open(t, nil).OpenJournal(ctx(t), journal)
		if err != nil {
			t.Fatal(err)
		}
		if j.Len() != 3 {
			t.Fatalf("a reopened journal has Len %d, want 3", j.Len())
		}
		if err := j.Append(step{N: 4}); err != nil {
			t.Fatal(err)
		}
		j.Close()
		if got := readSteps(t, s, journal); !slices.Equal(got, steps(1, 4)) {
			t.Fatalf("read back %v, want %v", got, steps(1, 4))
		}
	}},
	{"a journal opened without records reads as empty", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		write(t, s, sample())
		j, err := s.OpenJournal(ctx(t), journal)
		if err != nil {
			t.Fatal(err)
		}
		j.Close()
		if n, err := h.Open(t, nil).ReadJournal(ctx(t), journal, nil); n != 0 || err != nil {
			t.Fatalf("an empty journal: %d records, %v", n, err)
		}
	}},
	{"reading a journal that does not exist is fs.ErrNotExist", func(t *testing.T, h Harness) {
		_, err := h.Open(t, nil).ReadJournal(ctx(t), "journals/none.jsonl", nil)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("reading a missing journal: %v, want fs.ErrNotExist", err)
		}
	}},
	{"a removed journal is gone, and removing it again is no error", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		write(t, s, sample())
		appendSteps(t, s, journal, 1, 2)
		other := h.Open(t, nil)
		if err := other.RemoveJournal(ctx(t), journal); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadJournal(ctx(t), journal, nil); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("reading a removed journal: %v, want fs.ErrNotExist", err)
		}
		if err := s.RemoveJournal(ctx(t), journal); err != nil {
			t.Fatalf("removing a missing journal: %v", err)
		}
	}},
	{"an error from the reader stops the read and is returned", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		write(t, s, sample())
		appendSteps(t, s, journal, 1, 5)
		stop := errors.New("enough")
		calls := 0
		_, err := s.ReadJournal(ctx(t), journal, func(json.RawMessage) error {
			calls++
			if calls == 2 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || calls != 2 {
			t.Fatalf("a reader failing at record 2: %v after %d calls; want its error after 2", err, calls)
		}
	}},
	{"a closed journal refuses appends", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		write(t, s, sample())
		j, err := s.OpenJournal(ctx(t), journal)
		if err != nil {
			t.Fatal(err)
		}
		j.Close()
		wantContains(t, "an append after Close", j.Append(step{N: 1}), "closed")
	}},
	{"a torn last record is dropped and the next append continues", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		write(t, s, sample())
		appendSteps(t, s, journal, 1, 4)
		want := steps(1, 4)
		if h.TearJournal != nil {
			// The crash came during the append of step 4, which was
			// never acknowledged.
			h.TearJournal(t, journal)
			want = steps(1, 3)
		}
		other := h.Open(t, nil)
		if got := readSteps(t, other, journal); !slices.Equal(got, want) {
			t.Fatalf("after a crash: %v, want %v", got, want)
		}
		j, err := other.OpenJournal(ctx(t), journal)
		if err != nil {
			t.Fatal(err)
		}
		if j.Len() != len(want) {
			t.Fatalf("reopened after a crash: Len %d, want %d", j.Len(), len(want))
		}
		if err := j.Append(step{N: 9}); err != nil {
			t.Fatal(err)
		}
		j.Close()
		if got := readSteps(t, s, journal); !slices.Equal(got, append(want, 9)) {
			t.Fatalf("after the next append: %v, want %v", got, append(want, 9))
		}
	}},
	{"appends made at once are each recorded whole", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		write(t, s, sample())
		j, err := s.OpenJournal(ctx(t), journal)
		if err != nil {
			t.Fatal(err)
		}
		const writers, each = 8, 6
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					if err := j.Append(step{N: w*100 + i, Text: fmt.Sprintf("writer %d", w)}); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a concurrent append: %v", err)
		}
		if j.Len() != writers*each {
			t.Fatalf("Len %d after %d appends", j.Len(), writers*each)
		}
		j.Close()
		got := readSteps(t, h.Open(t, nil), journal)
		slices.Sort(got)
		var want []int
		for w := range writers {
			for i := range each {
				want = append(want, w*100+i)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read back %v, want every record once: %v", got, want)
		}
	}},
}
