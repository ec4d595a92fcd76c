package hosted

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

func TestRetryWaitPolicy(t *testing.T) {
	for _, tc := range []struct {
		status     int
		idempotent bool
		want       bool
	}{
		{429, false, true}, {503, false, true}, {500, false, false}, {500, true, true},
		{502, true, true}, {504, false, false}, {501, true, false}, {404, true, false}, {409, true, false},
	} {
		_, got := RetryWait(tc.status, http.Header{}, tc.idempotent, time.Second)
		if got != tc.want {
			t.Errorf("RetryWait(%d, idempotent=%v) retries = %v, want %v", tc.status, tc.idempotent, got, tc.want)
		}
	}
	h := http.Header{"Retry-After": {"600"}}
	if d, ok := RetryWait(429, h, false, time.Second); !ok || d != MaxRetryAfter {
		t.Errorf("Retry-After 600 waits %v (retry %v), want %v", d, ok, MaxRetryAfter)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"7": 7 * time.Second, " 1.5 ": 1500 * time.Millisecond,
		now.Add(3 * time.Second).Format(http.TimeFormat): 3 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):      0,
	} {
		if got, ok := RetryAfter(h, now); !ok || got != want {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v", h, got, ok, want)
		}
	}
	for _, h := range []string{"", "-1", "soon"} {
		if _, ok := RetryAfter(h, now); ok {
			t.Errorf("RetryAfter(%q) accepted a bad header", h)
		}
	}
}

func TestAPIErrorMessage(t *testing.T) {
	h := &Hints{
		NotFound:    Hint{Lead: "not found", Fix: "it is gone"},
		RateLimited: Hint{Lead: "rate limited by X", Fix: "slow down"},
	}
	for _, tc := range []struct {
		err  *APIError
		want string
	}{
		{&APIError{Op: "get", Target: "sbx", Status: 404, Message: "no", Attempts: 3, Hints: h}, "get (sbx): not found (HTTP 404: no); it is gone"},
		{&APIError{Op: "get", Status: 429, Attempts: 5, Hints: h}, "get: rate limited by X (HTTP 429 after 5 attempts: Too Many Requests); slow down"},
		{&APIError{Op: "get", Status: 409, Message: "busy", Hints: h}, "get: request rejected (HTTP 409: busy)"},
		{&APIError{Op: "get", Status: 500, Attempts: 2}, "get: request rejected (HTTP 500: Internal Server Error)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	err := fmt.Errorf("wrapped: %w", &APIError{Status: 404})
	if !errors.Is(err, sandbox.ErrNotFound) || !IsNotFound(err) || StatusOf(err) != 404 {
		t.Errorf("a wrapped 404 is not recognized as not found")
	}
	if IsNotFound(errors.New("plain")) || StatusOf(nil) != 0 {
		t.Errorf("a plain error is taken for an API answer")
	}
}

func TestServerMessage(t *testing.T) {
	for body, want := range map[string]string{
		`{"message":"bad  id"}`: "bad id",
		`{"message":["a","b"]}`: "a; b",
		`{"error":"nope"}`:      "nope",
		"plain\ntext":           "plain text",
		`{"statusCode":500}`:    `{"statusCode":500}`,
	} {
		if got := ServerMessage([]byte(body)); got != want {
			t.Errorf("ServerMessage(%q) = %q, want %q", body, got, want)
		}
	}
}

func TestScrub(t *testing.T) {
	if got := Scrub("key secret-key here", "secret-key"); got != "key (sensitive) here" {
		t.Errorf("Scrub = %q", got)
	}
	if got := Scrub("a b c", "b"); got != "a b c" {
		t.Errorf("Scrub replaced a 1-byte secret: %q", got)
	}
}
