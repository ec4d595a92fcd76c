package fakedaytona

import (
	"net/http"
	"strings"
	"testing"
)

func TestRejectsRequestsOutsideTheSpec(t *testing.T) {
	s := New(t)
	req, _ := http.NewRequest("POST", s.URL+"/sandbox", strings.NewReader(`{"cpu":"two"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
	n := len(s.violations.Take()) // expected; do not fail the test at cleanup
	if n != 1 {
		t.Fatalf("violations = %d, want 1", n)
	}
}

func TestParseCommandLikeTheDaemon(t *testing.T) {
	got := parseCommand(`/bin/sh -c 'eval "$(x)"' "a b" c`)
	want := []string{"/bin/sh", "-c", `eval "$(x)"`, "a b", "c"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%q", got)
	}
}
