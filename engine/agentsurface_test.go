package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/config"
)

// TestPlanReasonModelSettings: a model setting is part of the run's
// digest: setting one re-runs the run, and plan names it.
func TestPlanReasonModelSettings(t *testing.T) {
	c := planAfter(t, "run.r", `  capabilities = [capability.shell.default]`, `  capabilities = [capability.shell.default]
  settings {
    truncation           = "auto"
    store                = false
    metadata             = { team = "research" }
    prompt_cache_options = { mode = "explicit" }
  }`)
	wantReasons(t, c, ActionRerun,
		`agent.a: settings.metadata (unset) → {"team":"research"}`,
		`agent.a: settings.prompt_cache_options.mode (unset) → "explicit"`,
		`agent.a: settings.store (unset) → false`,
		`agent.a: settings.truncation (unset) → "auto"`)
}

// TestPlanReasonHandoffFilter: a handoff's input filter is part of the
// digest of the runs of the agent that hands off.
func TestPlanReasonHandoffFilter(t *testing.T) {
	withHandoff := strings.Replace(reasonsConfig, "run \"r\" {", `agent "b" {
  provider = provider.scripted
}
run "r" {`, 1)
	e, dir := newTestEngine(t, strings.Replace(withHandoff, "  capabilities = [capability.shell.default]", `  capabilities = [capability.shell.default]
  handoff {
    agent = agent.b
  }`, 1))
	planApply(t, e, PlanOptions{})
	e = reloaded(t, e, dir, strings.Replace(withHandoff, "  capabilities = [capability.shell.default]", `  capabilities = [capability.shell.default]
  handoff {
    agent = agent.b
    input_filter {
      keep_last = 4
    }
  }`, 1))
	st, err := e.State.Read()
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(t.Context(), st, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantReasons(t, p.Change("run.r"), ActionRerun, `agent.a: handoff.b.input_filter (unset) → {"keep_last":4}`)
}

// TestPlanModelFallbackResumes: model_fallback is not part of the digest:
// adding one to an agent whose model was unavailable resumes its run
// rather than running it again.
func TestPlanModelFallbackResumes(t *testing.T) {
	c := planAfter(t, "run.r", `model        = "gpt-4.1"`, `model        = "gpt-4.1"
  model_fallback = ["gpt-4.1-mini"]`)
	wantReasons(t, c, ActionNoop)
}

// TestAgentDigestHostedTools: an agent's hosted tools, argument by
// argument, are part of its digest; an agent without any digests as it
// did before hosted tools existed.
func TestAgentDigestHostedTools(t *testing.T) {
	digest := func(tool string) string {
		src := `provider "openai" {}
agent "a" {
  model = "gpt-5"
` + tool + `
}
`
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, diags := config.Load(dir, config.Options{})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return agentDigest(cfg, "a", "r")
	}
	none := digest("")
	if none != "81d02f965bf86fb95c061db97009b6d31a6f72a189bee3715807147eae93602d" {
		t.Fatalf("the digest of a plain agent changed: %s", none)
	}
	low := digest(`  tool "web" {
    type                = "web_search"
    search_context_size = "low"
  }`)
	high := digest(`  tool "web" {
    type                = "web_search"
    search_context_size = "high"
  }`)
	if none == low || low == high {
		t.Fatalf("digests without, with low and with high context: %s %s %s", none, low, high)
	}
	// An agent without hosted tools, handoff filters or the new settings
	// digests as agentctl computed it before they existed, so its runs
	// are not run again.
	if want := "1a6810361aaed0df81a2611b9d817a0763c6fc102feb84890402ee84a5076b74"; digest("  settings {\n    temperature = 0.2\n  }") != want {
		t.Fatalf("the digest of an agent that sets none of the new attributes changed")
	}
}
