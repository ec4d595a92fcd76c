package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowSync makes a journal's fsync take d and counts the calls, as a slow
// disk would.
func slowSync(j *Journal, d time.Duration) *atomic.Int32 {
	var n atomic.Int32
	j.sync = func(f *os.File) error {
		n.Add(1)
		time.Sleep(d)
		return f.Sync()
	}
	return &n
}

// TestJournalGroupCommit: 32 appends made at once share fsyncs, each
// returns only once durable, and all are in the journal, whole.
func TestJournalGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	syncs := slowSync(j, 20*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if err := j.Append(map[string]int{"call": i}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := syncs.Load(); n >= 32 || n < 1 {
		t.Fatalf("%d fsyncs for 32 concurrent appends; want them shared", n)
	}
	if j.Len() != 32 {
		t.Fatalf("Len %d, want 32", j.Len())
	}
	j.Close()
	seen := map[int]bool{}
	n, err := ReadJournal(path, func(raw json.RawMessage) error {
		var r map[string]int
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		seen[r["call"]] = true
		return nil
	})
	if err != nil || n != 32 || len(seen) != 32 {
		t.Fatalf("read %d records (%d distinct), %v", n, len(seen), err)
	}
}

// TestJournalGroupCommitFsyncFailure: a failed fsync fails every record of
// its batch and every later append.
func TestJournalGroupCommitFsyncFailure(t *testing.T) {
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.sync = func(*os.File) error { return errors.New("disk gone") }
	if err := j.Append("a"); err == nil {
		t.Fatal("an append whose fsync failed succeeded")
	}
	if err := j.Append("b"); err == nil {
		t.Fatal("an append after a failed fsync succeeded")
	}
}

// BenchmarkJournalFanOut: 32 steps checkpointed at once (an agent's 32
// concurrent tool results) on a disk whose fsync takes 5 ms, against one
// append alone:
//
//	go test ./state -run '^$' -bench JournalFanOut
func BenchmarkJournalFanOut(b *testing.B) {
	for _, fan := range []int{1, 32} {
		b.Run(fmt.Sprintf("appends=%d", fan), func(b *testing.B) {
			j, err := OpenJournal(filepath.Join(b.TempDir(), "j.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			syncs := slowSync(j, 5*time.Millisecond)
			rounds := 0
			for b.Loop() {
				rounds++
				var wg sync.WaitGroup
				for i := range fan {
					wg.Go(func() {
						if err := j.Append(map[string]int{"call": i}); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(syncs.Load())/float64(rounds), "fsyncs/op")
		})
	}
}
