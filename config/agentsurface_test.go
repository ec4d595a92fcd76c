package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// surfaceProviders are the model providers the agent-surface tests use:
// the default openai provider (Responses API), one on Chat Completions,
// and a scripted one.
const surfaceProviders = `
variable "secret" {
  default   = "s3cr3t-value"
  sensitive = true
}
provider "openai" {}
provider "openai" {
  alias = "compat"
  api   = "chat_completions"
}
provider "scripted" {
  script "s" {
    reply { text = "done" }
  }
}
`

// TestAgentSurfaceDecoded: hosted tools, the model settings, a model
// fallback and handoff input filters decode into the agent.
func TestAgentSurfaceDecoded(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": surfaceProviders + `
agent "writer" {
  model = "gpt-5"
}
agent "a" {
  model          = "gpt-5"
  model_fallback = ["gpt-5-mini", "gpt-4.1"]
  handoffs       = [agent.s]
  handoff {
    agent = agent.writer
    input_filter {
      remove_tool_calls = true
      keep_last         = 6
    }
  }
  tool "search" {
    type                = "web_search"
    search_context_size = "high"
  }
  tool "docs" {
    type             = "file_search"
    vector_store_ids = ["vs_1"]
  }
  settings {
    truncation             = "auto"
    store                  = true
    metadata               = { team = "research" }
    prompt_cache_retention = "24h"
    prompt_cache_options   = { mode = "explicit", ttl = "30m" }
    include                = ["web_search_call.action.sources"]
    tool_choice            = "web_search"
  }
}
agent "s" {
  provider = provider.scripted
}
`}, Options{})
	a := c.Agents["a"]
	if !cmp.Equal(a.ModelFallback, []string{"gpt-5-mini", "gpt-4.1"}) {
		t.Errorf("model_fallback %q", a.ModelFallback)
	}
	if !cmp.Equal(a.Handoffs, []string{"s", "writer"}) || a.HandoffFilters["writer"] != (HandoffFilter{RemoveToolCalls: true, KeepLast: 6}) || len(a.HandoffFilters) != 1 {
		t.Errorf("handoffs %q filters %+v", a.Handoffs, a.HandoffFilters)
	}
	if len(a.HostedTools) != 2 || a.HostedTools[0].Name != "search" || a.HostedTools[1].Type != "file_search" {
		t.Fatalf("hosted tools %+v", a.HostedTools)
	}
	if got := string(a.HostedTools[0].Config); got != `{"search_context_size":"high","type":"web_search"}` {
		t.Errorf("web_search definition %s", got)
	}
	s := a.Settings
	store := true
	want := AgentSettings{Truncation: "auto", Store: &store, Metadata: map[string]string{"team": "research"}, PromptCacheRetention: "24h",
		PromptCacheMode: "explicit", PromptCacheTTL: "30m", Include: []string{"web_search_call.action.sources"}, ToolChoice: "web_search"}
	if !cmp.Equal(s, want) {
		t.Errorf("settings: %s", cmp.Diff(want, s))
	}
}

// TestAgentSettingsDigestStable: an agent that sets none of the settings
// added with the Agents SDK's remaining ones encodes its settings as it
// did before them, so the digests of existing runs don't change.
func TestAgentSettingsDigestStable(t *testing.T) {
	temp := 0.2
	b, err := json.Marshal(AgentSettings{Temperature: &temp})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ReasoningEffort":"","ReasoningSummary":"","Verbosity":"","Temperature":0.2,"TopP":null,"MaxOutputTokens":0,"ParallelToolCalls":null,"ToolChoice":""}`
	if string(b) != want {
		t.Fatalf("settings encode as\n%s\nwant\n%s", b, want)
	}
}

// TestAgentSurfaceDiagnostics: every new attribute is checked where it
// is written, against the agent's provider.
func TestAgentSurfaceDiagnostics(t *testing.T) {
	for name, tc := range map[string]struct {
		agent   string
		line    int // of the agent body, 1 = its first line
		summary string
		detail  string
	}{
		"hosted tool on chat completions": {`provider = provider.openai.compat
  tool "web" {
    type = "web_search"
  }`, 3, "Hosted tool needs the Responses API", `api = "chat_completions"`},
		"hosted tool on scripted": {`provider = provider.scripted
  tool "web" {
    type = "web_search"
  }`, 3, "Hosted tool not offered", "provider.scripted, which has no hosted tools"},
		"unknown hosted tool": {`tool "web" {
    type = "web_serch"
  }`, 2, "Unknown tool type", `Did you mean "web_search"?`},
		"hosted tool argument": {`tool "docs" {
    type             = "file_search"
    vector_store_ids = ["vs_1"]
    max_num_results  = 100
  }`, 4, "Invalid max_num_results", "from 1 to 50"},
		"sensitive hosted tool argument": {`tool "web" {
    type            = "web_search"
    allowed_domains = [var.secret]
  }`, 3, "Sensitive value not allowed here", "A hosted tool's argument"},
		"type null is an agent tool": {`tool "t" {
    type = null
  }`, 1, "Missing required argument", `"agent" is required`},
		"agent argument on a hosted tool": {`tool "web" {
    type  = "web_search"
    agent = agent.b
  }`, 3, "Unsupported argument", `"agent" is not expected here`},
		"duplicate hosted tool": {`tool "web" {
    type = "web_search"
  }
  tool "web2" {
    type = "web_search"
  }`, 5, "Duplicate hosted tool", "one of each hosted tool"},
		"truncation on chat completions": {`provider = provider.openai.compat
  settings {
    truncation = "auto"
  }`, 3, "Setting not accepted by the model provider", `truncation is a setting of the Responses API`},
		"reasoning_summary on chat completions": {`provider = provider.openai.compat
  settings {
    reasoning_summary = "auto"
  }`, 3, "Setting not accepted by the model provider", `Chat Completions (api = "chat_completions")`},
		"frequency_penalty on responses": {`settings {
    frequency_penalty = 0.5
  }`, 2, "Setting not accepted by the model provider", "Chat Completions API"},
		"frequency_penalty range": {`provider = provider.openai.compat
  settings {
    frequency_penalty = 3
  }`, 3, "Invalid frequency_penalty", "from -2 to 2"},
		"truncation value": {`settings {
    truncation = "sometimes"
  }`, 2, "Invalid truncation", `"auto", "disabled"`},
		"include value": {`settings {
    include = ["web_search_call.result"]
  }`, 2, "Invalid include", `Did you mean "web_search_call.results"?`},
		"metadata pairs": {`settings {
    metadata = { for i in range(17) : "k${i}" => "v" }
  }`, 2, "Invalid metadata", "at most 16 pairs"},
		"metadata value": {`settings {
    metadata = { note = "${join("", [for i in range(513) : "x"])}" }
  }`, 2, "Invalid metadata", "longer than 512 characters"},
		"prompt_cache_options key": {`settings {
    prompt_cache_options = { lifetime = "30m" }
  }`, 2, "Invalid prompt_cache_options", `no "lifetime"`},
		"prompt_cache_options ttl": {`settings {
    prompt_cache_options = { ttl = "12h" }
  }`, 2, "Invalid prompt_cache_options.ttl", `"30m"`},
		"model_fallback repeats model": {`model_fallback = ["gpt-5-mini", "gpt-5"]`, 1, "Invalid model_fallback", `names "gpt-5" twice`},
		"model_fallback type":          {`model_fallback = "gpt-5-mini"`, 1, "Incorrect attribute value type", "model_fallback must be a list of strings"},
		"model_fallback without model": {`model          = null
  provider       = provider.scripted
  model_fallback = ["gpt-5-mini"]`, 3, "model_fallback without model", "set model"},
		"handoff twice": {`handoffs = [agent.b]
  handoff {
    agent = agent.b
  }`, 3, "Duplicate handoff", "list each agent once"},
		"empty input_filter": {`handoff {
    agent = agent.b
    input_filter {}
  }`, 3, "Empty input_filter", "filters nothing"},
		"keep_last": {`handoff {
    agent = agent.b
    input_filter {
      keep_last = 0
    }
  }`, 4, "Invalid keep_last", "at least 1"},
		"handoff to nobody": {`handoff {
    agent = agent.nobody
  }`, 2, "Reference to undeclared agent", ""},
	} {
		t.Run(name, func(t *testing.T) {
			model := "  model = \"gpt-5\"\n"
			if strings.HasPrefix(tc.agent, "model ") {
				model = ""
			}
			head := surfaceProviders + "agent \"b\" {\n  model = \"gpt-5\"\n}\nagent \"a\" {\n" + model
			src := head + "  " + tc.agent + "\n}\n"
			first := strings.Count(head, "\n") + 1 // the line tc.agent starts on
			_, diags := load(t, map[string]string{"main.hcl": src}, Options{})
			if !diags.HasErrors() {
				t.Fatal("loaded without an error")
			}
			d := diags[0]
			if d.Summary != tc.summary || !strings.Contains(d.Detail, tc.detail) || d.Subject == nil || d.Subject.Start.Line != first+tc.line-1 {
				for _, d := range diags {
					t.Errorf("got %s: %s at %v", d.Summary, d.Detail, d.Subject)
				}
				t.Errorf("want %q saying %q at line %d", tc.summary, tc.detail, first+tc.line-1)
			}
		})
	}
}
