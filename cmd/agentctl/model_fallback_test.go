package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/fakeopenai"
)

// TestModelFallbackShown: the agent's model answers 503 on every attempt,
// so its fallback answers; apply says so as it happens, and show names
// the model that answered and why the one before did not. The hosted
// web search the model ran is in the transcript, not run as a tool.
func TestModelFallbackShown(t *testing.T) {
	fake := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		if r.JSON["model"] == "gpt-main" {
			return fakeopenai.Status(503)
		}
		return fakeopenai.Reply{Hosted: []map[string]any{{"type": "web_search_call", "id": "ws_1", "status": "completed",
			"action": map[string]any{"type": "search", "query": "hello in French"}}}, Text: "bonjour"}
	}))
	dir := t.TempDir()
	src := `provider "openai" {
  max_retries = 1
}
agent "worker" {
  model          = "gpt-main"
  model_fallback = ["gpt-backup"]
  instructions   = "Answer."
  tool "web" {
    type = "web_search"
  }
}
run "job" {
  agent = agent.worker
  input = "Say hello."
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "OPENAI_BASE_URL="+fake.URL, "OPENAI_API_KEY=sk-test", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"apply", "-auto-approve", "-no-color", dir}, &stdout, &stderr, env); code != 0 {
		t.Fatalf("apply exited %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"run.job worker: model gpt-main unavailable, falling back to gpt-backup: openai responses API, model \"gpt-main\": HTTP 503 Service Unavailable",
		"run.job worker → hosted web_search_call: web search \"hello in French\" (completed)\nrun.job worker: bonjour\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply's output lacks %q:\n%s", want, out)
		}
	}
	stdout.Reset()
	if code := run([]string{"show", "-no-color", "-config", dir, "run.job"}, &stdout, &stderr, env); code != 0 {
		t.Fatalf("show exited %d\n%s", code, stderr.String())
	}
	out = stdout.String()
	for _, want := range []string{
		"[turn 1, worker, answered by gpt-backup]\n(model_fallback after gpt-main: openai responses API, model \"gpt-main\": HTTP 503 Service Unavailable",
		"→ hosted web_search_call: web search \"hello in French\" (completed)\nbonjour\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show's output lacks %q:\n%s", want, out)
		}
	}
}
