package specfake

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

func TestRecorderSend(t *testing.T) {
	rec := NewRecorder()
	rec.Header().Set("X-A", "1")
	if rec.Status != http.StatusOK {
		t.Fatalf("a new recorder has status %d, want 200", rec.Status)
	}
	rec.WriteHeader(http.StatusTeapot)
	rec.Write([]byte("short and stout"))
	w := httptest.NewRecorder()
	rec.Send(w)
	if w.Code != http.StatusTeapot || w.Header().Get("X-A") != "1" || w.Body.String() != "short and stout" {
		t.Errorf("sent %d %v %q", w.Code, w.Header(), w.Body.String())
	}
}

func TestViolations(t *testing.T) {
	var v Violations
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); v.Add("op %d", i) }()
	}
	wg.Wait()
	if got := v.Take(); len(got) != 10 {
		t.Fatalf("Take = %d violations, want 10", len(got))
	}
	if got := v.Take(); len(got) != 0 {
		t.Fatalf("Take after Take = %q, want none", got)
	}
}
