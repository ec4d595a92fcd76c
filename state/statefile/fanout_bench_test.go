package statefile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/scripted"
	"github.com/agentctl/agentctl/state/statefile"
)

// slowModel answers after a fixed latency, as a remote model does.
type slowModel struct {
	m       model.Model
	latency time.Duration
}

func (s slowModel) Respond(ctx context.Context, req *model.Request, sink func(model.Event)) (*model.Response, error) {
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	return s.m.Respond(ctx, req, sink)
}

// BenchmarkAgentToolFanOut: a lead agent calls fan agent tools at once,
// each a worker agent whose model answers after 200 ms, every step
// checkpointed to a real journal whose fsync takes 5 ms (a slow disk).
// The 32-way fan-out should cost about what one call does (target: at
// most 1.15x): the workers' model calls overlap and their checkpoints
// share fsyncs (group commit).
//
//	go test ./state -run '^$' -bench AgentToolFanOut -benchtime 5x
func BenchmarkAgentToolFanOut(b *testing.B) {
	const latency = 200 * time.Millisecond
	for _, fan := range []int{1, 32} {
		b.Run(fmt.Sprintf("tools=%d", fan), func(b *testing.B) {
			var syncs int32
			for i := 0; b.Loop(); i++ {
				j, err := statefile.OpenJournal(filepath.Join(b.TempDir(), fmt.Sprintf("run%d.jsonl", i)))
				if err != nil {
					b.Fatal(err)
				}
				n := statefile.SlowSync(j, 5*time.Millisecond)
				scripts := map[string][]scripted.Reply{}
				lead := &agentloop.Agent{Name: "lead", Instructions: "Fan out."}
				var calls []scripted.Call
				agents := map[string]*agentloop.Agent{"lead": lead}
				for w := range fan {
					name := fmt.Sprintf("w%d", w)
					scripts[name] = []scripted.Reply{{Text: "done " + name}}
					lead.AgentTools = append(lead.AgentTools, agentloop.AgentTool{Name: name, Agent: name, Description: "A worker."})
					args, _ := json.Marshal(map[string]string{"input": "work"})
					calls = append(calls, scripted.Call{Name: name, Arguments: args})
					agents[name] = &agentloop.Agent{Name: name, Instructions: "Work."}
				}
				scripts["lead"] = []scripted.Reply{{Calls: calls}, {Text: "all done"}}
				m := scripted.New(scripts)
				for _, a := range agents {
					a.Model = slowModel{m: m, latency: latency}
				}
				r := &agentloop.Runner{
					Agents:     agents,
					MaxTurns:   4,
					Checkpoint: func(_ context.Context, s agentloop.Step) error { return j.Append(s) },
				}
				if _, err := r.Run(context.Background(), "lead", "go", nil); err != nil {
					b.Fatal(err)
				}
				syncs += n.Load()
				j.Close()
			}
			b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/op")
		})
	}
}
