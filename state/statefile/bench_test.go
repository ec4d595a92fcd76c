package statefile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/seal"
)

// benchStep is a checkpoint record of realistic size (about 2 KiB: one
// model turn with some text and a tool call).
func benchStep(i int) map[string]any {
	return map[string]any{
		"step": i, "type": "model_turn",
		"output": []map[string]any{
			{"type": "message", "role": "assistant", "text": strings.Repeat("The build passes; next I will look at the tests. ", 30)},
			{"type": "function_call", "name": "exec", "call_id": fmt.Sprintf("call_%d", i), "arguments": `{"cmd":"go test ./..."}`},
		},
		"usage": map[string]int{"input_tokens": 1200 + i, "output_tokens": 300},
	}
}

// BenchmarkJournalAppend measures one checkpoint (encode, append, fsync)
// on a journal already holding N steps. The cost must not depend on N.
func BenchmarkJournalAppend(b *testing.B) {
	for _, prefill := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("step=%d", prefill), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "j.jsonl")
			j, err := OpenJournal(path)
			if err != nil {
				b.Fatal(err)
			}
			// Prefill without an fsync per record, then reopen.
			for i := range prefill {
				data, _ := json.Marshal(benchStep(i))
				if _, err := j.f.Write(encodeRecord(nil, data)); err != nil {
					b.Fatal(err)
				}
			}
			j.Close()
			j, err = OpenJournal(path)
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			if j.Len() != prefill {
				b.Fatalf("prefilled %d, Len %d", prefill, j.Len())
			}
			rec := benchStep(prefill)
			b.ResetTimer()
			for b.Loop() {
				if err := j.Append(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadJournal measures reading a 1,000-step journal (resume).
func BenchmarkReadJournal(b *testing.B) {
	path := filepath.Join(b.TempDir(), "j.jsonl")
	j, err := OpenJournal(path)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		data, _ := json.Marshal(benchStep(i))
		j.f.Write(encodeRecord(nil, data))
	}
	j.Close()
	for b.Loop() {
		if n, err := ReadJournal(path, func(json.RawMessage) error { return nil }); err != nil || n != 1000 {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkCheckpointEncryption is what encryption adds to a checkpoint
// (one journal append): with fsync, as apply does, and without (fsync
// replaced by nothing) to show the encryption's own cost.
func BenchmarkCheckpointEncryption(b *testing.B) {
	for _, enc := range []bool{false, true} {
		for _, synced := range []bool{true, false} {
			name := fmt.Sprintf("encrypted=%t/fsync=%t", enc, synced)
			b.Run(name, func(b *testing.B) {
				var keys *seal.Keys
				if enc {
					keys = testKeys(b, false)
				}
				j, err := OpenSealedJournal(filepath.Join(b.TempDir(), "j.jsonl"), keys, KindJournal, testBinding)
				if err != nil {
					b.Fatal(err)
				}
				defer j.Close()
				if !synced {
					j.sync = func(*os.File) error { return nil }
				}
				rec := benchStep(1)
				b.ResetTimer()
				for b.Loop() {
					if err := j.Append(rec); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
