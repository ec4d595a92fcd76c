package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// layeredRuns is a configuration of n runs of one scripted turn each, in
// layers of ten: run i takes the output of run i-10 in its input. It is
// the configuration bench/apply-runs generates for the whole-command
// comparison with terraform apply.
func layeredRuns(n int) string {
	var b strings.Builder
	b.WriteString("provider \"scripted\" {\n  script \"a\" {\n    reply { text = \"done\" }\n  }\n}\n\nagent \"a\" {\n  provider     = provider.scripted\n  instructions = \"Do it.\"\n}\n\n")
	for r := 0; r < n; r++ {
		deps := ""
		if r >= 10 {
			deps = fmt.Sprintf(" after ${run.r%d.output}", r-10)
		}
		fmt.Fprintf(&b, "run \"r%d\" {\n  agent = agent.a\n  input = \"Task %d%s\"\n}\n\n", r, r, deps)
	}
	return b.String()
}

// BenchmarkApplyRuns applies n one-turn runs into an empty state, the
// whole plan and apply as agentctl apply does them (without the command's
// start-up and lock). Its time per op, divided by n, is the engine's cost
// per run: flat when apply grows linearly.
func BenchmarkApplyRuns(b *testing.B) {
	for _, n := range []int{250, 500, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			src := layeredRuns(n)
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				e := engineIn(b, b.TempDir(), src)
				st, err := e.State.Read(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				p, err := e.Plan(ctx, st, PlanOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Apply(ctx, st, p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/run")
		})
	}
}
