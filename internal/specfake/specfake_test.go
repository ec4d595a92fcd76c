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

func TestLog(t *testing.T) {
	var mu sync.Mutex
	l := Log[int]{Mu: &mu}
	l.Fail(7)
	l.Served = append(l.Served, "GET /a")
	got := l.Requests()
	got[0] = "changed"
	if len(l.Faults) != 1 || *l.Faults[0] != 7 || l.Served[0] != "GET /a" {
		t.Errorf("faults %v, served %v: want one fault 7 and the served request unchanged by the caller", l.Faults, l.Served)
	}
}

func TestHolderReleases(t *testing.T) {
	var mu sync.Mutex
	h := Holder{Mu: &mu}
	var ch chan struct{}
	t.Run("held", func(t *testing.T) {
		release := h.Hold(t)
		ch = h.Ch
		release()
		release() // a second release does nothing
		if h.Ch != nil {
			t.Error("Ch is still set after release")
		}
		h.Hold(t) // released when this subtest ends
		ch = h.Ch
	})
	select {
	case <-ch:
	default:
		t.Error("a hold is not released when its test ends")
	}
}
