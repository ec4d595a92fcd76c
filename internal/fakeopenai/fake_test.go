package fakeopenai

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// recTB records Errorf calls instead of failing, to test the fake's own
// failure reporting.
type recTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recTB) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestSpecLoadTime(t *testing.T) {
	start := time.Now()
	if _, err := LoadSpec(); err != nil {
		t.Fatal(err)
	}
	t.Logf("OpenAPI document loaded (or cached) in %v", time.Since(start))
	start = time.Now()
	if _, err := LoadSpec(); err != nil {
		t.Fatal(err)
	}
	t.Logf("second LoadSpec: %v", time.Since(start))
	s, _ := LoadSpec()
	body := []byte(`{"model":"gpt-5","input":[{"type":"message","role":"user","content":"hi"}],"tools":[{"type":"function","name":"f","parameters":{},"strict":true}]}`)
	for i := range 3 {
		start = time.Now()
		if err := s.ValidateRequest(context.Background(), "/responses", body); err != nil {
			t.Fatal(err)
		}
		t.Logf("ValidateRequest #%d: %v", i+1, time.Since(start))
	}
}

func TestResponsesNonStreamingAndStreamingConform(t *testing.T) {
	s := New(t)
	s.Enqueue(
		Reply{Text: "hello there, world", Usage: Usage{InputTokens: 10, OutputTokens: 3, CachedTokens: 2, ReasoningTokens: 1}},
		Reply{Reasoning: &Reasoning{ID: "rs_1", EncryptedContent: "enc", Summary: []string{"thinking"}},
			Compaction: &Compaction{EncryptedContent: "cmp"},
			Text:       "hi", Calls: []Call{FunctionCall("call_1", "exec_command", `{"cmd":"ls"}`), FunctionCall("call_2", "exec_command", `{bad`)}},
	)
	resp, body := post(t, s.URL+"/responses", `{"model":"gpt-5","input":"hi"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"hello there, world"`) {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	resp, body = post(t, s.URL+"/responses", `{"model":"gpt-5","input":"hi","stream":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, want := range []string{"event: response.created", "event: response.output_item.added", "event: response.output_text.delta",
		"event: response.function_call_arguments.delta", "event: response.function_call_arguments.done", "event: response.output_item.done",
		"event: response.completed", `{bad`} {
		if !strings.Contains(body, want) {
			t.Errorf("stream lacks %q", want)
		}
	}
	reqs := s.Requests()
	if len(reqs) != 2 || !reqs[1].Stream || reqs[0].Stream || reqs[1].Seq != 2 {
		t.Fatalf("requests: %+v", reqs)
	}
}

func TestChatConforms(t *testing.T) {
	s := New(t)
	s.Enqueue(Text("plain answer"), Calls(FunctionCall("c1", "f", `{"a":1}`)))
	resp, body := post(t, s.URL+"/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "plain answer") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	resp, body = post(t, s.URL+"/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "data: [DONE]") || !strings.Contains(body, `"tool_calls"`) || !strings.Contains(body, `"usage"`) {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

func TestInvalidRequestFailsTheTest(t *testing.T) {
	rt := &recTB{TB: t}
	s := New(rt)
	s.Enqueue(Text("unused"))
	resp, _ := post(t, s.URL+"/responses", `{"model":"gpt-5","input":[{"type":"function_call_output","output":"x"}],"temperature":"hot"}`)
	if resp.StatusCode != 400 {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
	errs := rt.errors()
	if len(errs) != 1 || !strings.Contains(errs[0], "does not conform") {
		t.Fatalf("errors: %q", errs)
	}
	t.Logf("reported: %.300s", errs[0])
	if s.Requests()[0].Invalid == nil {
		t.Fatal("request not marked invalid")
	}
}

func TestFaults(t *testing.T) {
	s := New(t)
	s.Enqueue(Status(429, "Retry-After", "1"), Reply{Text: "a longer answer", Fault: Fault{Kind: FaultTruncate, AfterEvents: 3}})
	resp, _ := post(t, s.URL+"/responses", `{"model":"gpt-5","input":"hi"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("got %d %v", resp.StatusCode, resp.Header)
	}
	resp2, err := http.Post(s.URL+"/responses", "application/json", strings.NewReader(`{"model":"gpt-5","input":"hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	b, rerr := io.ReadAll(resp2.Body)
	events := strings.Count(string(b), "data: ")
	if rerr == nil {
		t.Fatalf("truncated stream read without error (%d events, headers %v, TE %v)", events, resp2.Header, resp2.TransferEncoding)
	}
	if events != 3 {
		t.Fatalf("read %d events before the cut, want 3", events)
	}
}
