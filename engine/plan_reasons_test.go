package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/builtin"
)

// reasonsConfig is a one-run configuration whose parts the tests below
// change one at a time: each replacement is applied to it.
const reasonsConfig = `
variable "secret" {
  type      = string
  sensitive = true
  default   = "hunter2-secret-value"
}
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
manifest "m" {
  env = { LANG = "C" }
  env "TOKEN" {
    value     = var.secret
    ephemeral = true
  }
}
sandbox "s" {
  provider = provider.local
  manifest = manifest.m
}
capability "shell" "default" {
  timeout = "30s"
}
agent "a" {
  provider     = provider.scripted
  model        = "gpt-4.1"
  instructions = "Be brief."
  sandbox      = sandbox.s
  capabilities = [capability.shell.default]
}
run "r" {
  agent = agent.a
  input = "old question"
}
`

// reloaded is e with src as its configuration, against the same state.
func reloaded(t *testing.T, e *Engine, dir, src string) *Engine {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir, config.Options{Registry: builtin.Registry()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return &Engine{Config: cfg, State: e.State, Version: e.Version}
}

// planAfter applies reasonsConfig, then plans with each old → new
// replacement made in it, and returns the change for addr.
func planAfter(t *testing.T, addr string, replace ...string) *Change {
	t.Helper()
	e, dir := newTestEngine(t, reasonsConfig)
	planApply(t, e, PlanOptions{})
	src := reasonsConfig
	for i := 0; i < len(replace); i += 2 {
		if !strings.Contains(src, replace[i]) {
			t.Fatalf("%q is not in the configuration", replace[i])
		}
		src = strings.Replace(src, replace[i], replace[i+1], 1)
	}
	e = reloaded(t, e, dir, src)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(context.Background(), st, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Change(addr)
	if c == nil {
		t.Fatalf("no change for %s", addr)
	}
	return c
}

func wantReasons(t *testing.T, c *Change, action Action, want ...string) {
	t.Helper()
	if c.Action != action || !slices.Equal(c.Reasons, want) {
		t.Fatalf("%s: %s %q\nwant %s %q", c.Address, c.Action, c.Reasons, action, want)
	}
}

func TestPlanReasonAgentSetting(t *testing.T) {
	c := planAfter(t, "run.r",
		`model        = "gpt-4.1"`, `model        = "gpt-5"`,
		`  capabilities = [capability.shell.default]`, "  capabilities = [capability.shell.default]\n  settings { temperature = 0.2 }")
	wantReasons(t, c, ActionRerun,
		`agent.a: model "gpt-4.1" → "gpt-5"`,
		`agent.a: settings.temperature (unset) → 0.2`)
}

func TestPlanReasonCapability(t *testing.T) {
	c := planAfter(t, "run.r", `timeout = "30s"`, `timeout = "5m"`)
	wantReasons(t, c, ActionRerun, `agent.a: capability.shell.default.timeout "30s" → "5m0s"`)
}

func TestPlanReasonInput(t *testing.T) {
	c := planAfter(t, "run.r", `input = "old question"`, `input = "new question"`)
	wantReasons(t, c, ActionRerun, `input: "old question" → "new question"`)

	// A long input shows the part around the first difference.
	long := strings.Repeat("x", 200)
	c = planAfter(t, "run.r", `input = "old question"`, `input = "`+long+` new question"`)
	if c.Action != ActionRerun || len(c.Reasons) != 1 || len(c.Reasons[0]) > 200 ||
		!strings.HasPrefix(c.Reasons[0], `input: "old question" → "xxx`) || !strings.HasSuffix(c.Reasons[0], "…") {
		t.Fatalf("long input: %s %q", c.Action, c.Reasons)
	}
}

func TestPlanReasonSandboxManifest(t *testing.T) {
	c := planAfter(t, "sandbox.s", `env = { LANG = "C" }`, `env = { LANG = "C.UTF-8", TZ = "UTC" }`)
	wantReasons(t, c, ActionUpdate, `env.LANG "C" → "C.UTF-8"`, `env.TZ (unset) → "UTC"`)
}

func TestPlanReasonSandboxSettings(t *testing.T) {
	c := planAfter(t, "sandbox.s", `provider "local" { isolation = "none" }`, `provider "local" { isolation = "namespaces" }`)
	wantReasons(t, c, ActionReplace, `isolation "none" → "namespaces"`)
}

// A value that holds a sensitive value is recorded only as a digest and
// never shown: the reason says "(sensitive value)".
func TestPlanReasonSensitive(t *testing.T) {
	e, dir := newTestEngine(t, strings.Replace(reasonsConfig, `"Be brief."`, `"Use hunter2-secret-value."`, 1))
	planApply(t, e, PlanOptions{})
	for _, name := range []string{"state.json", "state.json.log"} {
		data, err := os.ReadFile(filepath.Join(dir, ".agentctl", name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "hunter2") {
			t.Fatalf("%s holds the sensitive value:\n%s", name, data)
		}
	}
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a := st.Runs["run.r"].Attributes["agent.a.instructions"]; !a.Sensitive || a.Value != nil || a.Digest == "" {
		t.Fatalf("instructions recorded as %+v, want a sensitive digest", a)
	}
	if a := st.Runs["run.r"].Attributes["agent.a.model"]; string(a.Value) != `"gpt-4.1"` {
		t.Fatalf("model recorded as %+v", a)
	}
	e = reloaded(t, e, dir, strings.Replace(reasonsConfig, `"Be brief."`, `"Use hunter2-secret-value, then stop."`, 1))
	p, err := e.Plan(context.Background(), st, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantReasons(t, p.Change("run.r"), ActionRerun, `agent.a: instructions changed (sensitive value)`)
	e = reloaded(t, e, dir, reasonsConfig)
	if p, err = e.Plan(context.Background(), st, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	wantReasons(t, p.Change("run.r"), ActionRerun, `agent.a: instructions (sensitive value) → "Be brief."`)
}

// A state written before attributes were recorded gives the reasons it
// always gave.
func TestPlanReasonOlderState(t *testing.T) {
	e, dir := newTestEngine(t, reasonsConfig)
	st := planApply(t, e, PlanOptions{})
	st.Runs["run.r"].Attributes = nil
	st.Sandboxes["sandbox.s"].Attributes = nil
	e = reloaded(t, e, dir, strings.NewReplacer(
		`model        = "gpt-4.1"`, `model        = "gpt-5"`,
		`env = { LANG = "C" }`, `env = { LANG = "C.UTF-8" }`).Replace(reasonsConfig))
	p, err := e.Plan(context.Background(), st, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantReasons(t, p.Change("run.r"), ActionRerun, "agent.a changed", "sandbox.s changed")
	wantReasons(t, p.Change("sandbox.s"), ActionUpdate, "manifest environment or root changed")
}

func TestExcerpts(t *testing.T) {
	a, b := excerpts(`"short"`, `"other"`)
	if a != `"short"` || b != `"other"` {
		t.Fatalf("short values were cut: %s %s", a, b)
	}
	head := strings.Repeat("é", 100)
	a, b = excerpts(`"`+head+`one"`, `"`+head+`two"`)
	if !strings.HasPrefix(a, "…") || !strings.Contains(a, "one") || !strings.Contains(b, "two") {
		t.Fatalf("excerpts = %s, %s", a, b)
	}
	for _, s := range []string{a, b} {
		if !strings.HasSuffix(s, `"`) || strings.ContainsRune(s, '\uFFFD') {
			t.Fatalf("bad excerpt %q", s)
		}
	}
}

// -target=run.NAME selects every instance of the block, run.NAME["KEY"]
// only that one; quotes and escapes in keys are matched exactly.
func TestPlanTargetInstances(t *testing.T) {
	e, _ := newTestEngine(t, `
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
}
run "r" {
  for_each = toset(["a", "say \"hi\""])
  agent    = agent.a
  input    = each.key
}
run "rr" {
  agent = agent.a
  input = "other"
}
`)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target string
		want   []string
	}{
		{`run.r`, []string{`run.r["a"]`, `run.r["say \"hi\""]`}},
		{`run.r["say \"hi\""]`, []string{`run.r["say \"hi\""]`}},
		{`run.rr`, []string{`run.rr`}},
		{`run.r["b"]`, nil},
	} {
		p, err := e.Plan(context.Background(), st, PlanOptions{Targets: []string{c.target}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ch := range p.Changes {
			got = append(got, ch.Address)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("-target=%s planned %q, want %q", c.target, got, c.want)
		}
	}
}

// TestPlanReasonOwnChangeBesideUpstream: a run whose agent changed and
// which reads an upstream run that executes first names its own change
// too, not only the upstream one.
func TestPlanReasonOwnChangeBesideUpstream(t *testing.T) {
	withDown := reasonsConfig + `
agent "b" {
  provider     = provider.scripted
  instructions = "Summarize."
}
run "down" {
  agent = agent.b
  input = "summarize ${run.r.output}"
}
`
	withDown = strings.Replace(withDown, `script "a" {`, "script \"b\" {\n    reply { text = \"summary\" }\n  }\n  script \"a\" {", 1)
	e, dir := newTestEngine(t, withDown)
	planApply(t, e, PlanOptions{})
	src := strings.Replace(withDown, `input = "old question"`, `input = "new question"`, 1)
	src = strings.Replace(src, `instructions = "Summarize."`, `instructions = "Summarize in one line."`, 1)
	e = reloaded(t, e, dir, src)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(context.Background(), st, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantReasons(t, p.Change("run.down"), ActionRerun,
		`agent.b: instructions "Summarize." → "Summarize in one line."`,
		"upstream run.r executes first")
}
