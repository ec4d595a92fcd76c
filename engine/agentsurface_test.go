package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/providers/builtin"
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
	st, err := e.State.Read(context.Background())
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
		cfg, diags := config.Load(dir, config.Options{Registry: builtin.Registry()})
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

// TestAgentSurfaceReachesOpenAI: an agent's model settings, hosted tools,
// model fallback and handoff input filter, as the configuration declares
// them, reach the requests to the model (which the fake checks against
// the OpenAPI document), and the hosted call and fallback are recorded.
func TestAgentSurfaceReachesOpenAI(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		switch {
		case r.JSON["model"] == "gpt-main":
			return fakeopenai.Status(503)
		case r.JSON["instructions"] == "Write.":
			return fakeopenai.Text("written")
		}
		return fakeopenai.Reply{Hosted: []map[string]any{{"type": "web_search_call", "id": "ws_1", "status": "completed",
			"action": map[string]any{"type": "search", "query": "q"}}},
			Calls: []fakeopenai.Call{fakeopenai.FunctionCall("h1", "transfer_to_writer", `{}`)}}
	}))
	e, _ := newTestEngine(t, fmt.Sprintf(`
provider "openai" {
  base_url    = %q
  max_retries = 0
}
agent "researcher" {
  model          = "gpt-main"
  model_fallback = ["gpt-backup"]
  instructions   = "Research."
  tool "web" {
    type            = "web_search"
    allowed_domains = ["example.com"]
  }
  handoff {
    agent = agent.writer
    input_filter {
      remove_tool_calls = true
    }
  }
  settings {
    truncation             = "auto"
    store                  = true
    metadata               = { team = "research" }
    prompt_cache_retention = "in_memory"
    prompt_cache_options   = { mode = "implicit", ttl = "30m" }
    include                = ["web_search_call.action.sources"]
    tool_choice            = "required"
    max_output_tokens      = 500
  }
}
agent "writer" {
  model        = "gpt-backup"
  instructions = "Write."
}
run "r" {
  agent = agent.researcher
  input = "Find it."
}
`, srv.URL))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	st := planApply(t, e, PlanOptions{})
	if r := st.Runs["run.r"]; r.Status != RunCompleted || string(r.Output) != `"written"` {
		t.Fatalf("run %s: %s %s", r.Status, r.Output, r.Error)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	body := reqs[1].JSON // the fallback model's request
	for field, want := range map[string]string{
		"model": `"gpt-backup"`, "truncation": `"auto"`, "store": `true`, "metadata": `{"team":"research"}`,
		"prompt_cache_retention": `"in_memory"`, "prompt_cache_options": `{"mode":"implicit","ttl":"30m"}`,
		"include": `["reasoning.encrypted_content","web_search_call.action.sources"]`, "tool_choice": `"required"`,
		"max_output_tokens": `500`,
	} {
		if got, _ := json.Marshal(body[field]); string(got) != want {
			t.Errorf("%s = %s, want %s", field, got, want)
		}
	}
	tools, _ := json.Marshal(body["tools"])
	if !strings.Contains(string(tools), `{"filters":{"allowed_domains":["example.com"]},"type":"web_search"}`) {
		t.Errorf("tools %s", tools)
	}
	// The writer is given the conversation without tool calls: the
	// input alone.
	if got := reqs[2].InputLines(); !cmp.Equal(got, []string{"user: Find it."}) {
		t.Errorf("the writer was given %q", got)
	}
	steps := journalSteps(t, e, st, "run.r")
	resp := steps[1].Response
	if resp.Model != "gpt-backup" || len(resp.Fallbacks) != 1 || resp.Output[0].Type != "hosted_tool_call" {
		t.Fatalf("recorded response %+v", resp)
	}
	if steps[2].InputFilter == nil || !steps[2].InputFilter.RemoveToolCalls {
		t.Fatalf("the handoff step %+v", steps[2])
	}
}
