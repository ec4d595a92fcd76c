package openai_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/openai"
)

// retries lists the retry events ev received.
func (e *events) retries() []model.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []model.Event
	for _, ev := range e.evs {
		if ev.Type == model.EventRetry {
			out = append(out, ev)
		}
	}
	return out
}

// TestRetryEvents: every wait before a retry is announced with its delay
// and what failed: the server's Retry-After for a 429, the backoff for a
// 503 and a broken stream. max_retries bounds the requests of a turn
// whatever failed.
func TestRetryEvents(t *testing.T) {
	h := newHarness(t, "", nil)
	h.fake.Enqueue(
		fakeopenai.Status(429, "Retry-After-Ms", "30"),
		fakeopenai.Status(503),
		fakeopenai.Reply{Text: "cut off", Fault: fakeopenai.Fault{Kind: fakeopenai.FaultTruncate, AfterEvents: 3}},
		fakeopenai.Text("done"),
	)
	ev := &events{}
	if resp := mustRespond(t, h, baseRequest(), ev); resp.Text() != "done" {
		t.Fatalf("text %q", resp.Text())
	}
	got := ev.retries()
	want := []string{"429", "503", "a broken stream"}
	if len(got) != len(want) {
		t.Fatalf("retry events %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].After != w {
			t.Errorf("retry %d after %q, want %q", i, got[i].After, w)
		}
	}
	if got[0].Delay != 30*time.Millisecond {
		t.Errorf("the 429's retry waits %s, want the 30ms it asked for", got[0].Delay)
	}

	// Three failures of different kinds exhaust max_retries = 2: three
	// requests, two retries announced.
	h = newHarness(t, "", func(c *openai.Config) { c.MaxRetries = 2 })
	h.fake.Enqueue(
		fakeopenai.Status(500),
		fakeopenai.Reply{Text: "cut off", Fault: fakeopenai.Fault{Kind: fakeopenai.FaultTruncate, AfterEvents: 3}},
		fakeopenai.Status(429, "Retry-After-Ms", "1"),
		fakeopenai.Text("unused"),
	)
	ev = &events{}
	_, err := h.client.Respond(context.Background(), baseRequest(), ev.sink)
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Attempts != 3 {
		t.Fatalf("got %v, want a 429 after 3 attempts", err)
	}
	if n := len(ev.retries()); n != 2 {
		t.Fatalf("%d retries announced, want 2", n)
	}
}

// TestMaxRetriesSetting: max_retries = 0 disables retries, leaving it out
// gives the default, and a negative value is refused at its value.
func TestMaxRetriesSetting(t *testing.T) {
	decode := func(src string) (*openai.ProviderSettings, hcl.Diagnostics) {
		f, diags := hclsyntax.ParseConfig([]byte(src), "main.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		s, diags := openai.DecodeProvider(f.Body)
		return s.(*openai.ProviderSettings), diags
	}
	attempts := func(s *openai.ProviderSettings) int {
		fake := fakeopenai.New(t)
		for range 5 {
			fake.Enqueue(fakeopenai.Status(500, "Retry-After-Ms", "1"))
		}
		s.BaseURL = fake.URL
		c, err := openai.New(s.Config(openai.EnvLookup([]string{"OPENAI_API_KEY=" + sentinelKey})))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Respond(context.Background(), baseRequest(), nil); err == nil {
			t.Fatal("a 500 answered")
		}
		return len(fake.Requests())
	}
	s, diags := decode("max_retries = 0\n")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if n := attempts(s); n != 1 {
		t.Errorf("max_retries = 0: %d requests, want 1", n)
	}
	s, _ = decode("")
	if n := attempts(s); n != openai.DefaultMaxRetries+1 {
		t.Errorf("no max_retries: %d requests, want %d", n, openai.DefaultMaxRetries+1)
	}
	_, diags = decode("\nmax_retries = -1\n")
	if !diags.HasErrors() || diags[0].Subject == nil || diags[0].Subject.Start.Line != 2 || diags[0].Summary != "Invalid max_retries" {
		t.Fatalf("max_retries = -1: %v", diags)
	}
}
