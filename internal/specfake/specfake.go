// Package specfake holds what the fakes of hosted services (Daytona, E2B,
// Runloop) share to check every exchange against the service's vendored
// OpenAPI document: the router, a recorder that holds an answer until it
// is validated, and the list of violations that fails the test. Used by
// tests only.
package specfake

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// NewRouter routes requests to doc's operations (its examples are not
// validated: vendored documents carry stale ones).
func NewRouter(doc *openapi3.T) (routers.Router, error) {
	return legacy.NewRouter(doc, openapi3.DisableExamplesValidation())
}

// Recorder captures a handler's answer so that it can be validated before
// it is sent. Its status is 200 until the handler writes another.
type Recorder struct {
	H      http.Header
	Status int
	Body   bytes.Buffer
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{H: http.Header{}, Status: http.StatusOK} }

// Header implements http.ResponseWriter.
func (r *Recorder) Header() http.Header { return r.H }

// WriteHeader implements http.ResponseWriter.
func (r *Recorder) WriteHeader(c int) { r.Status = c }

// Write implements http.ResponseWriter.
func (r *Recorder) Write(b []byte) (int, error) { return r.Body.Write(b) }

// Send writes the recorded answer to w.
func (r *Recorder) Send(w http.ResponseWriter) {
	for k, v := range r.H {
		w.Header()[k] = v
	}
	w.WriteHeader(r.Status)
	_, _ = w.Write(r.Body.Bytes())
}

// Violations are the exchanges that broke the document. It is safe for
// concurrent use.
type Violations struct {
	mu   sync.Mutex
	list []string
}

// Add records a violation.
func (v *Violations) Add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.list = append(v.list, fmt.Sprintf(format, args...))
}

// Take returns the violations so far and forgets them.
func (v *Violations) Take() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.list
	v.list = nil
	return out
}

// Report fails t with each violation not taken, prefixed by what (for
// example "e2bfake: spec violation").
func (v *Violations) Report(t testing.TB, what string) {
	t.Helper()
	for _, s := range v.Take() {
		t.Errorf("%s: %s", what, s)
	}
}

// Log holds what a fake's test sets and reads besides the service's
// state: the faults to inject and the requests served. Mu is the fake's
// own lock; its handlers hold it while they read and change Faults and
// Served.
type Log[F any] struct {
	Mu     *sync.Mutex
	Faults []*F
	Served []string
}

// Fail adds a fault.
func (l *Log[F]) Fail(f F) {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	l.Faults = append(l.Faults, &f)
}

// Requests returns a copy of the requests served so far.
func (l *Log[F]) Requests() []string {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return append([]string(nil), l.Served...)
}

// Holder holds the answers to creates: while Ch is set, a fake's create
// handler waits for it to close before it answers. Mu is the fake's own
// lock, held while Ch is read or set.
type Holder struct {
	Mu *sync.Mutex
	Ch chan struct{}
}

// Hold makes creates wait until release is called; release is also
// called when t's test ends, so no handler waits past it.
func (h *Holder) Hold(t testing.TB) (release func()) {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	ch := make(chan struct{})
	h.Ch = ch
	var once sync.Once
	release = func() {
		once.Do(func() {
			h.Mu.Lock()
			if h.Ch == ch {
				h.Ch = nil
			}
			h.Mu.Unlock()
			close(ch)
		})
	}
	t.Cleanup(release)
	return release
}
