package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/builtin"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/manifest"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

// LargeConfig writes a configuration of nRuns runs over nSandboxes local
// sandboxes (10 manifests of 5 files shared between them, 20 agents) to
// dir. Every tenth run starts a chain: the next nine each take the
// previous run's output in their input.
func largeConfig(nRuns, nSandboxes int) string {
	var b strings.Builder
	b.WriteString("provider \"local\" { isolation = \"none\" }\n\nprovider \"scripted\" {\n")
	for a := 0; a < 20; a++ {
		fmt.Fprintf(&b, "  script \"a%d\" {\n    reply { text = \"done\" }\n  }\n", a)
	}
	b.WriteString("}\n\ncapability \"shell\" \"default\" {}\n\n")
	for m := 0; m < 10; m++ {
		fmt.Fprintf(&b, "manifest \"m%d\" {\n", m)
		for f := 0; f < 5; f++ {
			fmt.Fprintf(&b, "  file \"data/f%d.txt\" { content = \"manifest %d file %d\\n\" }\n", f, m, f)
		}
		b.WriteString("}\n\n")
	}
	for s := 0; s < nSandboxes; s++ {
		fmt.Fprintf(&b, "sandbox \"s%d\" {\n  provider = provider.local\n  manifest = manifest.m%d\n}\n\n", s, s%10)
	}
	for a := 0; a < 20; a++ {
		fmt.Fprintf(&b, "agent \"a%d\" {\n  provider     = provider.scripted\n  instructions = \"Agent %d.\"\n  sandbox      = sandbox.s%d\n  capabilities = [capability.shell.default]\n}\n\n", a, a, a%nSandboxes)
	}
	for r := 0; r < nRuns; r++ {
		input := fmt.Sprintf("Task %d.", r)
		if r%10 != 0 {
			input = fmt.Sprintf("Task %d after: ${run.r%d.output}", r, r-1)
		}
		fmt.Fprintf(&b, "run \"r%d\" {\n  agent   = agent.a%d\n  sandbox = sandbox.s%d\n  input   = %q\n}\n\n", r, r%20, r%nSandboxes, input)
	}
	return b.String()
}

// completedState builds the state an apply of cfg would leave: every
// sandbox created and materialized, every run completed with output
// "done".
func completedState(ctx context.Context, tb testing.TB, e *Engine) *state.State {
	tb.Helper()
	cfg := e.Config
	st := state.New()
	sbDigest := map[string]string{}
	for addr, sbc := range cfg.SandboxInstances {
		m := sandboxManifest(cfg, sbc)
		entries, err := manifest.EntryDigests(ctx, m)
		if err != nil {
			tb.Fatal(err)
		}
		ss := &state.Sandbox{
			Address: addr, Provider: sbc.Provider, Kind: "local", Status: statusStopped,
			ConfigDigest:   sandboxConfigDigest(cfg, sbc),
			ManifestDigest: manifest.Digest(m, entries),
			EntryDigests:   entries,
			Session:        sandbox.SessionState{Provider: "local", ID: "/nonexistent/" + addr},
		}
		st.Sandboxes[addr] = ss
		sbDigest[addr] = digestJSON([]string{ss.ConfigDigest, ss.ManifestDigest})
	}
	order, err := e.runOrder()
	if err != nil {
		tb.Fatal(err)
	}
	for _, addr := range order {
		in, err := e.runInputs(ctx, st, cfg.RunInstances[addr], sbDigest, nil)
		if err != nil {
			tb.Fatal(err)
		}
		st.Runs[addr] = &state.Run{
			Address: addr, Agent: cfg.RunInstances[addr].Agent, Status: RunCompleted,
			Digest: runDigest(in.digests), DigestInputs: in.digests, Output: json.RawMessage(`"done"`), Turns: 1,
			Journal: state.JournalName(addr),
		}
	}
	return st
}

func loadLarge(tb testing.TB, nRuns, nSandboxes int) (*Engine, *state.State) {
	tb.Helper()
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(largeConfig(nRuns, nSandboxes)), 0o644); err != nil {
		tb.Fatal(err)
	}
	cfg, diags := config.Load(dir, config.Options{Registry: builtin.Registry()})
	if diags.HasErrors() {
		tb.Fatal(diags)
	}
	sd, err := local.OpenDir(filepath.Join(dir, ".agentctl"))
	if err != nil {
		tb.Fatal(err)
	}
	e := &Engine{Config: cfg, State: sd, Registry: builtin.Registry()}
	return e, completedState(context.Background(), tb, e)
}

// TestPlanLargeNoChanges checks the benchmark's premise: against the state
// an apply leaves, the large configuration plans no changes.
func TestPlanLargeNoChanges(t *testing.T) {
	e, st := loadLarge(t, 200, 20)
	p, err := e.Plan(context.Background(), st, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Changes {
		if c.Action != ActionNoop {
			t.Fatalf("%s: %s %v", c.Address, c.Action, c.Reasons)
		}
	}
	if len(p.Changes) != 220 {
		t.Fatalf("%d changes, want 220", len(p.Changes))
	}
	// Changing one run's upstream output re-runs its chain, naming why.
	st.Runs["run.r0"].Output = json.RawMessage(`"other"`)
	p, err = e.Plan(context.Background(), st, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Change("run.r1")
	if c.Action != ActionRerun || strings.Join(c.Reasons, "; ") != "input changed; run.r0.output changed" {
		t.Fatalf("run.r1: %s %v", c.Action, c.Reasons)
	}
	if c := p.Change("run.r0"); c.Action != ActionNoop {
		t.Fatalf("run.r0: %s", c.Action)
	}
}

// BenchmarkPlan1000Runs100Sandboxes plans 1,000 runs and 100 sandboxes
// against a state holding all of them completed, without refresh.
func BenchmarkPlan1000Runs100Sandboxes(b *testing.B) {
	e, st := loadLarge(b, 1000, 100)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		p, err := e.Plan(ctx, st, PlanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if p.HasChanges() {
			b.Fatal("plan has changes")
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/plan")
}

// TestWriteLargeFixture writes the benchmark configuration and its
// completed state to $AGENTCTL_BENCH_FIXTURE (skipped when unset), for
// whole-command timings of agentctl plan (docs/benchmarks-engine.md).
func TestWriteLargeFixture(t *testing.T) {
	dir := os.Getenv("AGENTCTL_BENCH_FIXTURE")
	if dir == "" {
		t.Skip("set AGENTCTL_BENCH_FIXTURE=DIR to write the fixture")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(largeConfig(1000, 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A 100-run pipeline over 10 sandboxes, to be applied for real and
	// then re-applied unchanged.
	small := filepath.Join(dir, "pipeline100")
	if err := os.MkdirAll(small, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(small, "main.hcl"), []byte(largeConfig(100, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir, config.Options{Registry: builtin.Registry()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sd, err := local.OpenDir(filepath.Join(dir, ".agentctl"))
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Config: cfg, State: sd, Registry: builtin.Registry()}
	if err := sd.Write(context.Background(), completedState(context.Background(), t, e)); err != nil {
		t.Fatal(err)
	}
}
