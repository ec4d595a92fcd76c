package e2bfake

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/specfake"
)

// takeViolations returns the violations found so far and forgets them
// (so the test's own cleanup does not report them).
func (s *Server) takeViolations() []string { return s.violations.Take() }

// A response with a field the document does not declare is a violation:
// the documents are made strict.
func TestUndeclaredResponseFieldIsAViolation(t *testing.T) {
	s := New(t)
	s.Templates["base"] = true
	req, _ := http.NewRequest(http.MethodGet, "https://api."+Domain+"/sandboxes/nope", http.NoBody)
	req.Header.Set("X-API-Key", s.APIKey)
	rec := specfake.NewRecorder()
	s.validated(rec, req, s.apiRouter, func(*http.Request) (int, string) { return 0, "" },
		func(w http.ResponseWriter, _ *http.Request, _ string, _ map[string]string, _ []byte) {
			writeJSON(w, http.StatusOK, map[string]any{"templateID": "base", "sandboxID": "x", "clientID": "c", "envdVersion": "0.2.4",
				"startedAt": "2026-01-01T00:00:00Z", "endAt": "2026-01-01T01:00:00Z", "cpuCount": 1, "memoryMB": 512, "diskSizeMB": 512,
				"state": "running", "bogus": true})
		})
	v := s.takeViolations()
	if len(v) != 1 || !strings.Contains(v[0], "bogus") {
		t.Errorf("violations = %q, want one naming the undeclared property bogus", v)
	}
}

// A request with a field the document does not declare is refused with
// 400 and is a violation.
func TestUndeclaredRequestFieldIsAViolation(t *testing.T) {
	s := New(t)
	req, _ := http.NewRequest(http.MethodPost, "https://api."+Domain+"/sandboxes", strings.NewReader(`{"templateID":"base","bogus":1}`))
	req.Header.Set("X-API-Key", s.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status = %d, want 400", resp.StatusCode)
	}
	if v := s.takeViolations(); len(v) != 1 || !strings.Contains(v[0], "bogus") {
		t.Errorf("violations = %q", v)
	}
}

// A Connect message with a field the .proto does not declare is a
// violation.
func TestUndeclaredProtoFieldIsAViolation(t *testing.T) {
	s := New(t)
	b := &fsb{id: "isbx", state: "running", endAt: time.Now().Add(time.Hour), procs: map[uint32]*proc{}, owned: map[string]bool{}, tmp: map[string]bool{}, metadata: map[string]string{}}
	s.sandboxes[b.id] = b
	// Field 99, varint 1: in no message of process.proto.
	req, _ := http.NewRequest(http.MethodPost, "https://49983-isbx."+Domain+"/process.Process/SendSignal", bytes.NewReader([]byte{0x98, 0x06, 0x01}))
	req.Header.Set("Content-Type", "application/proto")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if v := s.takeViolations(); len(v) != 1 || !strings.Contains(v[0], "process.SendSignalRequest") {
		t.Errorf("violations = %q (answer %d %s)", v, resp.StatusCode, body)
	}
}
