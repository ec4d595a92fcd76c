package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/fakeopenai"
)

func retryConfig(retries string) string {
	return fmt.Sprintf(`provider "openai" {
  %s
}
agent "worker" {
  model        = "gpt-test"
  instructions = "Answer."
}
run "job" {
  agent = agent.worker
  input = "Say hello."
}
`, retries)
}

// applyWith applies src in a new directory against fake and returns the
// exit code, stdout and stderr.
func applyWith(t *testing.T, fake *fakeopenai.Server, src string, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "OPENAI_BASE_URL="+fake.URL, "OPENAI_API_KEY=sk-test", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	code := run(append(append([]string{"apply", "-auto-approve"}, args...), dir), &stdout, &stderr, env)
	return code, stdout.String(), stderr.String()
}

// TestModelRetryNotice: a model call answered 429 is retried after the
// wait the server asks for, and apply says so on one line, in text and
// as a -json event.
func TestModelRetryNotice(t *testing.T) {
	fake := fakeopenai.New(t)
	fake.Enqueue(fakeopenai.Status(429, "Retry-After-Ms", "20"), fakeopenai.Text("hello"))
	code, out, errOut := applyWith(t, fake, retryConfig(""), "-no-color")
	if code != 0 {
		t.Fatalf("apply exited %d\n%s\n%s", code, out, errOut)
	}
	if n := strings.Count(out, "retrying in"); n != 1 || !strings.Contains(out, "\nrun.job worker: retrying in 20ms after 429\n") {
		t.Fatalf("apply's output does not hold one retry line:\n%s", out)
	}

	fake.Enqueue(fakeopenai.Status(429, "Retry-After-Ms", "20"), fakeopenai.Text("hello"))
	code, out, errOut = applyWith(t, fake, retryConfig(""), "-json")
	if code != 0 {
		t.Fatalf("apply -json exited %d\n%s\n%s", code, out, errOut)
	}
	var retries []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if ev["type"] == "retry" {
			retries = append(retries, ev)
		}
	}
	if len(retries) != 1 {
		t.Fatalf("want one retry event, got %v in\n%s", retries, out)
	}
	ev, _ := retries[0]["run_event"].(map[string]any)
	if retries[0]["address"] != "run.job" || ev["text"] != "retrying in 20ms after 429" || ev["agent"] != "worker" {
		t.Fatalf("retry event %v", retries[0])
	}
}

// TestModelMaxRetriesZero: max_retries = 0 makes one attempt; a negative
// value is refused where it is written.
func TestModelMaxRetriesZero(t *testing.T) {
	fake := fakeopenai.New(t)
	fake.Enqueue(fakeopenai.Status(500, "Retry-After-Ms", "1"), fakeopenai.Text("hello"))
	code, out, errOut := applyWith(t, fake, retryConfig("max_retries = 0"), "-no-color")
	if code == 0 || !strings.Contains(errOut, "HTTP 500") || !strings.Contains(errOut, "(after 1 attempt)") || strings.Contains(out, "retrying") {
		t.Fatalf("apply with max_retries = 0 against a 500: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}

	code, out, errOut = applyWith(t, fake, retryConfig("max_retries = -1"), "-no-color")
	if code == 0 || !strings.Contains(errOut, "main.hcl line 2") || !strings.Contains(errOut, "max_retries must be 0 or more, got -1: it counts the retries after a failed model call, 0 disables them") {
		t.Fatalf("apply with max_retries = -1: exit %d\n%s\n%s", code, out, errOut)
	}
}
