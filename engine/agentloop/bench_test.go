package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/providers/scripted"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
	"github.com/agentctl/agentctl/state/statefile"
)

// timedTool wraps a tool and adds up the time spent inside it, so the
// engine's own cost per turn is (total - tool time) / turns.
type timedTool struct {
	tools.Tool
	mu    sync.Mutex
	spent time.Duration
}

func (t *timedTool) Call(ctx context.Context, args string) (tools.Output, error) {
	start := time.Now()
	out, err := t.Tool.Call(ctx, args)
	t.mu.Lock()
	t.spent += time.Since(start)
	t.mu.Unlock()
	return out, err
}

// turnRun runs one agent for turns turns, each calling exec_command with
// `true` in a host-directory sandbox, checkpointing every step to a real
// journal (append + fsync) in journalDir. It returns the engine overhead
// per turn for each window of turns and the total.
func turnRun(tb testing.TB, turns int, journalDir string) (perTurn []time.Duration, total, tool time.Duration) {
	tb.Helper()
	replies := make([]scripted.Reply, 0, turns+1)
	for i := 0; i < turns; i++ {
		replies = append(replies, scripted.Reply{Calls: []scripted.Call{{Name: "exec_command", Arguments: json.RawMessage(`{"cmd":"true"}`)}}})
	}
	replies = append(replies, scripted.Reply{Text: "done"})
	hd, err := hostfs.NewHostDir(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	ws := &sandbox.Workspace{Sandbox: hd}
	exec := &timedTool{Tool: tools.NewExecCommand(ws, tools.ExecOptions{Root: hd.Path()}, nil)}
	j, err := statefile.OpenJournal(filepath.Join(journalDir, fmt.Sprintf("bench-%d.jsonl", turns)))
	if err != nil {
		tb.Fatal(err)
	}
	defer j.Close()
	var stamps []time.Time
	var toolAt []time.Duration
	r := &agentloop.Runner{
		Agents: map[string]*agentloop.Agent{"a": {
			Name: "a", Model: scripted.New(map[string][]scripted.Reply{"a": replies}),
			Instructions: "bench", Tools: []tools.Tool{exec},
		}},
		MaxTurns: turns + 1,
		Checkpoint: func(_ context.Context, s agentloop.Step) error {
			if err := j.Append(s); err != nil {
				return err
			}
			if s.Kind == agentloop.StepTool {
				stamps = append(stamps, time.Now())
				exec.mu.Lock()
				toolAt = append(toolAt, exec.spent)
				exec.mu.Unlock()
			}
			return nil
		},
	}
	start := time.Now()
	res, err := r.Run(context.Background(), "a", "go", nil)
	if err != nil {
		tb.Fatal(err)
	}
	total = time.Since(start)
	if res.Turns != turns+1 {
		tb.Fatalf("turns = %d", res.Turns)
	}
	// Overhead of turn i: time between tool results i-1 and i, minus the
	// tool time spent in between.
	for i := 1; i < len(stamps); i++ {
		perTurn = append(perTurn, stamps[i].Sub(stamps[i-1])-(toolAt[i]-toolAt[i-1]))
	}
	return perTurn, total, exec.spent
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(len(ds))
}

// BenchmarkTurnOverhead measures the engine's cost per turn of a 1,000-turn
// scripted run whose tool is `true`: model call, tool dispatch, output
// formatting and the two checkpoints (each an append + fsync) per turn,
// excluding the time the tool itself takes. It reports the mean overhead
// over turns 10-20 and 990-1000 to show it stays flat, and the peak heap.
// AGENTCTL_BENCH_JOURNAL_DIR puts the journal elsewhere (e.g. a tmpfs, to
// separate the engine's cost from the disk's fsync latency).
func BenchmarkTurnOverhead(b *testing.B) {
	dir := os.Getenv("AGENTCTL_BENCH_JOURNAL_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	for b.Loop() {
		before := heapPeak()
		perTurn, total, tool := turnRun(b, 1000, dir)
		b.ReportMetric(float64((total-tool).Microseconds())/1000/1000, "ms-overhead/turn")
		b.ReportMetric(float64(mean(perTurn[9:19]).Microseconds())/1000, "ms/turn@10")
		b.ReportMetric(float64(mean(perTurn[len(perTurn)-10:]).Microseconds())/1000, "ms/turn@1000")
		b.ReportMetric(float64(heapPeak()-before)/(1<<20), "MB-heap-growth")
	}
}

// heapPeak reads the total heap memory mapped by the agentloop.
func heapPeak() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestTurnOverheadIsFlat checks, without timing anything, that the work per
// turn does not grow with the conversation: the journal holds exactly two
// records per turn (constant checkpoint cost) after a 200-turn run.
func TestTurnOverheadIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("long run")
	}
	dir := t.TempDir()
	turnRun(t, 200, dir)
	n, err := statefile.ReadJournal(filepath.Join(dir, "bench-200.jsonl"), func(json.RawMessage) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	// input + 200 × (model + tool) + final model
	if want := 1 + 200*2 + 1; n != want {
		t.Fatalf("journal has %d records, want %d", n, want)
	}
}
