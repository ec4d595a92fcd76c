// Package cassette records a model provider's HTTP exchanges in cassette
// files and serves them back with no network: apply -record, a provider's
// replay setting, agentctl test -replay (docs/openai-provider.md, "Record
// and replay").
//
// The file format is go-vcr's (gopkg.in/dnaeon/go-vcr.v4/pkg/cassette,
// YAML, format version 2), so cassettes can be read with its tools. The
// recording and matching are this package's: every exchange is written
// as soon as it is made (an interrupted apply keeps what it recorded, as
// its journals do), nothing but the Content-Type header is kept, bodies
// are scrubbed of sensitive values, and a replayed request is matched on
// its method and body, each recorded exchange served once, so that a
// request that was not recorded fails loudly, naming what differs.
package cassette

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
	"gopkg.in/dnaeon/go-vcr.v4/pkg/cassette"
)

// Options say how exchanges are recorded and matched.
type Options struct {
	// Scrub replaces sensitive values (and credentials) in text before it
	// is recorded; a replayed request is scrubbed the same way before it
	// is matched. nil keeps text as it is.
	Scrub func(string) string
	// Normalize replaces the parts of a request body that differ between
	// two runs of the same pipeline (a tool output's wall time) with
	// stand-ins; requests are matched on normalized bodies. nil matches
	// bodies as they are.
	Normalize func(string) string
}

func (o Options) scrub(s string) string {
	if o.Scrub == nil {
		return s
	}
	return o.Scrub(s)
}

func (o Options) key(body string) string {
	body = o.scrub(body)
	if o.Normalize != nil {
		body = o.Normalize(body)
	}
	return body
}

// File is the cassette file of the provider at addr (provider.openai,
// provider.openai.ollama) in dir.
func File(dir, addr string) string { return filepath.Join(dir, addr+".yaml") }

// name is the go-vcr cassette name of file: its path without ".yaml".
func name(file string) string { return strings.TrimSuffix(file, ".yaml") }

// keptHeaders are the only headers a cassette holds: the rest carry
// credentials (Authorization, OpenAI-Organization, OpenAI-Project) or
// vary between runs.
var keptHeaders = []string{"Content-Type"}

func keep(h http.Header) http.Header {
	out := http.Header{}
	for _, k := range keptHeaders {
		if v := h.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

// cleanURL is u without credentials: no user info, no query (some
// OpenAI-compatible servers take a key as a query parameter).
func cleanURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	c.Fragment = ""
	return c.String()
}

// requestBody reads req's body and leaves req able to send it again.
func requestBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return b, nil
}

// Recorder records exchanges into one cassette file. It is safe for
// concurrent use; exchanges are appended in the order they complete.
type Recorder struct {
	file string
	opts Options

	mu  sync.Mutex
	c   *cassette.Cassette
	n   int   // exchanges recorded by this recorder
	err error // the first failure to save
}

// NewRecorder records into file, adding to the exchanges it already holds
// (so a run resumed in a later apply -record completes its recording).
func NewRecorder(file string, opts Options) (*Recorder, error) {
	c := cassette.New(name(file))
	if _, err := os.Stat(file); err == nil {
		if c, err = cassette.Load(name(file)); err != nil {
			return nil, fmt.Errorf("reading the cassette %s to add to it: %w; move it away to record afresh", file, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cassette %s: %w", file, err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, fmt.Errorf("creating the cassette directory: %w", err)
	}
	// Marshalled as go-vcr's recorder marshals it.
	c.MarshalFunc = yaml.Marshal
	return &Recorder{file: file, opts: opts, c: c}, nil
}

// File is the cassette file the recorder writes.
func (r *Recorder) File() string { return r.file }

// Recorded is the number of exchanges this recorder recorded.
func (r *Recorder) Recorded() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Err is the first failure to write the cassette, nil when every exchange
// was saved.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Transport returns a RoundTripper that sends requests through real and
// records each exchange. Failures to save do not fail the model call
// (it was made and paid for): they are kept for Err, which the apply
// reports.
func (r *Recorder) Transport(real http.RoundTripper) http.RoundTripper {
	if real == nil {
		real = http.DefaultTransport
	}
	return &recording{r: r, real: real}
}

type recording struct {
	r    *Recorder
	real http.RoundTripper
}

func (t *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := requestBody(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := t.real.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	o := t.r.opts
	t.r.add(&cassette.Interaction{
		Request: cassette.Request{
			Proto: req.Proto, ProtoMajor: req.ProtoMajor, ProtoMinor: req.ProtoMinor,
			Host: req.URL.Hostname(), URL: cleanURL(req.URL), Method: req.Method,
			Headers: keep(req.Header), Body: o.scrub(string(body)),
		},
		Response: cassette.Response{
			Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
			Status: resp.Status, Code: resp.StatusCode, ContentLength: -1,
			Headers: keep(resp.Header), Body: o.scrub(string(respBody)),
			Duration: time.Since(start).Round(time.Millisecond),
		},
	})
	return resp, nil
}

func (r *Recorder) add(i *cassette.Interaction) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.c.AddInteraction(i)
	r.n++
	if err := r.c.SaveWithFS(atomicFS{}); err != nil && r.err == nil {
		r.err = fmt.Errorf("writing the cassette %s: %w", r.file, err)
	}
}

// atomicFS writes a cassette through a temporary file and a rename, so a
// crash leaves the previous complete cassette, never half of one.
type atomicFS struct{}

func (atomicFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

func (atomicFS) IsFileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

func (atomicFS) WriteFile(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".cassette-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// Player serves the exchanges of one cassette file. It is safe for
// concurrent use.
type Player struct {
	file string
	opts Options

	mu    sync.Mutex
	ints  []*cassette.Interaction
	keys  []string
	used  []bool
	asked int
}

// Load reads the cassette file for replay.
func Load(file string, opts Options) (*Player, error) {
	if _, err := os.Stat(file); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("replay: there is no cassette %s: record one with agentctl apply -record %s", file, filepath.Dir(file))
		}
		return nil, fmt.Errorf("replay: %w", err)
	}
	c, err := cassette.Load(name(file))
	if err != nil {
		return nil, fmt.Errorf("replay: reading the cassette %s: %w", file, err)
	}
	p := &Player{file: file, opts: opts, ints: c.Interactions, used: make([]bool, len(c.Interactions))}
	for _, i := range c.Interactions {
		p.keys = append(p.keys, opts.key(i.Request.Body))
	}
	return p, nil
}

// MissError is a request the cassette does not hold.
type MissError struct {
	File string
	// N is the request's number among those the player was asked, from 1.
	N      int
	Method string
	Path   string
	// Closest is the recorded request (numbered from 1 in the file) that
	// shares the longest beginning with this one, 0 when none is left;
	// Offset is the byte where they part, and Recorded and Asked the text
	// around it.
	Closest          int
	Offset           int
	Recorded, Asked  string
	Recordings, Left int
}

func (e *MissError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "replay: request %d of this run's provider (%s %s) was not recorded in %s", e.N, e.Method, e.Path, e.File)
	switch {
	case e.Recordings == 0:
		b.WriteString(", which holds no exchanges")
	case e.Left == 0:
		fmt.Fprintf(&b, ": all %d recorded exchanges were already served", e.Recordings)
	default:
		fmt.Fprintf(&b, ": it first differs from recorded request %d at byte %d of the body: recorded %q, now %q", e.Closest, e.Offset, e.Recorded, e.Asked)
	}
	fmt.Fprintf(&b, "; if the pipeline changed on purpose, record it again with agentctl apply -record %s", filepath.Dir(e.File))
	return b.String()
}

// RoundTrip serves the first unused recorded exchange whose method and
// body match req. A miss is reported through the context's miss slot
// (WithMissSlot) and answered with an HTTP 400 that clients must not
// retry.
func (p *Player) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := requestBody(req)
	if err != nil {
		return nil, err
	}
	key := p.opts.key(string(body))
	p.mu.Lock()
	p.asked++
	n := p.asked
	for i, in := range p.ints {
		if p.used[i] || in.Request.Method != req.Method || p.keys[i] != key {
			continue
		}
		p.used[i] = true
		p.mu.Unlock()
		resp, err := in.GetHTTPResponse()
		if err != nil {
			return nil, fmt.Errorf("replay: recorded exchange %d of %s: %w", i+1, p.file, err)
		}
		resp.Request = req
		return resp, nil
	}
	miss := p.miss(n, req, key)
	p.mu.Unlock()
	if slot, ok := req.Context().Value(missKey{}).(*missSlot); ok {
		slot.set(miss)
	}
	msg := strings.ReplaceAll(miss.Error(), `"`, `'`)
	return &http.Response{
		Status: "400 Bad Request", StatusCode: http.StatusBadRequest, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}, "X-Should-Retry": {"false"}},
		Body:    io.NopCloser(strings.NewReader(`{"error":{"message":"` + jsonEscape(msg) + `","type":"replay_miss"}}`)),
		Request: req,
	}, nil
}

// miss describes a request no unused exchange matches. p.mu is held.
func (p *Player) miss(n int, req *http.Request, key string) *MissError {
	e := &MissError{File: p.file, N: n, Method: req.Method, Path: req.URL.Path, Recordings: len(p.ints)}
	best := -1
	for i, k := range p.keys {
		if p.used[i] {
			continue
		}
		e.Left++
		if off := commonPrefix(k, key); best < 0 || off > e.Offset {
			best, e.Offset = i, off
		}
	}
	if best >= 0 {
		e.Closest = best + 1
		e.Recorded = excerpt(p.keys[best], e.Offset)
		e.Asked = excerpt(key, e.Offset)
	}
	return e
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// excerpt is s around byte off: a little before, more after.
func excerpt(s string, off int) string {
	from := max(off-20, 0)
	to := min(off+60, len(s))
	out := s[from:to]
	if from > 0 {
		out = "…" + out
	}
	if to < len(s) {
		out += "…"
	}
	return out
}

func jsonEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

type missKey struct{}

type missSlot struct {
	mu  sync.Mutex
	err *MissError
}

func (s *missSlot) set(e *MissError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = e
	}
}

// WithMissSlot returns a context whose requests report a replay miss to
// the returned function, which gives the first miss (nil for none): a
// client uses it to fail with the miss itself rather than with the HTTP
// error the player answers it with.
func WithMissSlot(ctx context.Context) (context.Context, func() error) {
	s := &missSlot{}
	return context.WithValue(ctx, missKey{}, s), func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.err == nil {
			return nil
		}
		return s.err
	}
}
