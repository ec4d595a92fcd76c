// Package e2bfake is an in-process fake of E2B for tests: its control
// plane (api.<domain>), the envd daemon of each sandbox
// (49983-<id>.<domain>: the process and filesystem services over Connect
// RPC and the HTTP /files endpoints) and the sandboxes' ports
// (<port>-<id>.<domain>, proxied to the port on the loopback). It speaks
// HTTPS (HTTP/2) on one listener; Client returns an HTTP client that
// reaches it for every host of its domain.
//
// Every control-plane and /files request and response is validated
// against the vendored OpenAPI documents (providers/e2b/testdata/spec),
// made strict (an object may hold only the properties its schema
// declares); every Connect message against the vendored .proto
// descriptors (no unknown fields) and the Connect protocol by connect-go's
// own handlers. A violation fails the test.
//
// It models the documented lifecycle: a sandbox runs until its timeout
// passes (then it is killed, or paused with autoPause), pause stops its
// processes (SIGSTOP) and connect resumes them, kill removes them and its
// files; envd refuses requests to a paused or killed sandbox with 502 as
// E2B's proxy does. Commands really run, with /bin/sh on the host: a
// sandbox's filesystem is the host's, confined to Root (tests use
// workspace roots under it), plus transfer files /tmp/agentctl-*.
package e2bfake

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/specfake"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Domain is the fake's domain.
const Domain = "e2b.test"

// Fault makes requests fail: the next Count requests whose method matches
// (empty = any) and whose path contains PathContains are answered with
// Status (and Retry-After when set).
type Fault struct {
	Method       string
	PathContains string
	Status       int
	RetryAfter   string
	Count        int
	// After answers the fault after the request was carried out (a
	// lost answer), not instead of it.
	After bool
}

// Server is the fake.
type Server struct {
	t      testing.TB
	srv    *httptest.Server
	APIKey string
	// Root confines every sandbox filesystem path.
	Root string
	// Templates are the templates sandboxes can be created from.
	Templates map[string]bool

	apiRouter, envdRouter routers.Router
	envdHandler           http.Handler

	// internal holds the fake's own files (snapshots), outside Root.
	internal string
	// ca signed the fake's certificate; proxy and caFile serve other
	// processes (Environ).
	ca     *x509.Certificate
	caFile string
	proxy  net.Listener

	mu         sync.Mutex
	sandboxes  map[string]*fsb
	snapshots  map[string]*snapshot // by name
	log        specfake.Log[Fault]
	seq        int
	violations specfake.Violations
	now        func() time.Time
	// hold holds the answers to creates (HoldCreates).
	hold specfake.Holder
	// limit is the control plane's rate limit (SetRateLimit).
	limit struct {
		n      int
		per    time.Duration
		start  time.Time
		count  int
		denied int
	}
}

// SetRateLimit limits the control plane to n requests per window, as
// E2B's rate limits do: a request past it is answered 429 with a
// Retry-After of the rest of the window (in whole seconds, at least 1).
// n = 0 lifts the limit.
func (s *Server) SetRateLimit(n int, per time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit.n, s.limit.per, s.limit.start, s.limit.count = n, per, s.now(), 0
}

// RateLimited returns how many requests the rate limit refused.
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit.denied
}

// limited applies the rate limit to a control-plane request; callers
// hold s.mu.
func (s *Server) limited() *Fault {
	l := &s.limit
	if l.n <= 0 {
		return nil
	}
	now := s.now()
	if now.Sub(l.start) >= l.per {
		l.start, l.count = now, 0
	}
	l.count++
	if l.count <= l.n {
		return nil
	}
	l.denied++
	wait := int((l.per - now.Sub(l.start) + time.Second - 1) / time.Second)
	return &Fault{Status: http.StatusTooManyRequests, RetryAfter: strconv.Itoa(max(wait, 1))}
}

// fsb is one sandbox.
type fsb struct {
	id, template, token string
	metadata, env       map[string]string
	autoPause           bool
	internet            *bool
	state               string // running, paused; killed sandboxes are removed
	startedAt, endAt    time.Time
	procs               map[uint32]*proc
	owned               map[string]bool // top-level entries under Root it created
	tmp                 map[string]bool // transfer files in /tmp it created
	created             map[string]any  // the create request
	accounts            *accounts
}

// New starts a fake; it is closed, and checked for violations, when the
// test ends.
func New(t testing.TB) *Server {
	t.Helper()
	api, envdDoc, err := loadSpecs()
	if err != nil {
		t.Fatal(err)
	}
	ar, err := specfake.NewRouter(api)
	if err != nil {
		t.Fatal(err)
	}
	er, err := specfake.NewRouter(envdDoc)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, APIKey: "e2b_test_key_0123456789abcdef", Root: root, Templates: map[string]bool{"base": true},
		apiRouter: ar, envdRouter: er, sandboxes: map[string]*fsb{}, snapshots: map[string]*snapshot{}, now: time.Now, internal: t.TempDir()}
	s.log.Mu = &s.mu
	s.hold.Mu = &s.mu
	s.envdHandler = s.connectHandlers()
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.EnableHTTP2 = true
	cert, ca := certificate(t)
	s.ca = ca
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.srv.StartTLS()
	s.startProxy(t)
	t.Cleanup(func() {
		s.srv.Close()
		s.killAll()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.violations.Report(t, "e2bfake: spec violation")
	})
	return s
}

// loadSpecs reads the vendored documents, next to this package's source.
func loadSpecs() (api, envd *openapi3.T, err error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, nil, errors.New("e2bfake: cannot locate the vendored specs")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "testdata", "spec")
	load := func(name string) (*openapi3.T, error) {
		d, err := openapi3.NewLoader().LoadFromFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("e2bfake: loading %s: %w", name, err)
		}
		d.Servers = nil
		strict(d)
		return d, nil
	}
	if api, err = load("openapi.yml"); err != nil {
		return nil, nil, err
	}
	envd, err = load("envd/envd.yaml")
	return api, envd, err
}

// strict forbids properties a component schema does not declare, except
// in schemas that take part in an allOf (whose parts each see only their
// own properties).
func strict(d *openapi3.T) {
	inAllOf := map[*openapi3.Schema]bool{}
	for _, ref := range d.Components.Schemas {
		for _, part := range ref.Value.AllOf {
			inAllOf[part.Value] = true
		}
	}
	no := false
	for _, ref := range d.Components.Schemas {
		sc := ref.Value
		if len(sc.Properties) == 0 || inAllOf[sc] || len(sc.AllOf) > 0 || sc.AdditionalProperties.Has != nil || sc.AdditionalProperties.Schema != nil {
			continue
		}
		sc.AdditionalProperties.Has = &no
	}
}

// Client returns an HTTP client that reaches the fake for every host
// (trusting its certificate), as E2B's hosts are reached in production.
func (s *Server) Client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(s.ca)
	addr := s.srv.Listener.Addr().String()
	dial := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dial.DialContext(ctx, network, addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
	}
	return &http.Client{Transport: tr}
}

// HoldCreates makes the fake create sandboxes but hold the answers until
// release is called (a client killed while it waits leaves a sandbox it
// never learnt about).
func (s *Server) HoldCreates() (release func()) {
	return s.hold.Hold(s.t)
}

// Fail installs a fault.
func (s *Server) Fail(f Fault) {
	s.log.Fail(f)
}

// Requests returns "METHOD host path" of every request served so far.
func (s *Server) Requests() []string {
	return s.log.Requests()
}

// State returns a sandbox's state: running, paused, or "" when E2B no
// longer knows it.
func (s *Server) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	if b := s.sandboxes[id]; b != nil {
		return b.state
	}
	return ""
}

// Created returns the create request of a sandbox.
func (s *Server) Created(id string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[id]; b != nil {
		return b.created
	}
	return nil
}

// EndAt returns when a sandbox's timeout passes.
func (s *Server) EndAt(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[id]; b != nil {
		return b.endAt
	}
	return time.Time{}
}

// Expire makes a sandbox's timeout pass now.
func (s *Server) Expire(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[id]; b != nil {
		b.endAt = s.now().Add(-time.Second)
	}
	s.expire()
}

// Kill kills a sandbox behind the client's back.
func (s *Server) Kill(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[id]; b != nil {
		s.kill(b)
	}
}

// IDs returns the ids of the sandboxes E2B knows (running or paused),
// sorted.
func (s *Server) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	var out []string
	for id := range s.sandboxes {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func (s *Server) violation(format string, args ...any) { s.violations.Add(format, args...) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeErr answers the Error schema.
func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

// serve routes by host.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	host, _, _ := strings.Cut(r.Host, ":")
	sub, ok := strings.CutSuffix(host, "."+Domain)
	if !ok {
		s.violation("%s %s%s: not a host of %s", r.Method, r.Host, r.URL.Path, Domain)
		writeErr(w, http.StatusBadGateway, "unknown host")
		return
	}
	s.mu.Lock()
	s.log.Served = append(s.log.Served, r.Method+" "+sub+" "+r.URL.Path)
	s.mu.Unlock()
	if sub == "api" {
		s.serveAPI(w, r)
		return
	}
	portStr, id, ok := strings.Cut(sub, "-")
	port, err := strconv.Atoi(portStr)
	if !ok || err != nil {
		writeErr(w, http.StatusBadGateway, "unknown host")
		return
	}
	s.mu.Lock()
	s.expire()
	b := s.sandboxes[id]
	state := ""
	if b != nil {
		state = b.state
	}
	s.mu.Unlock()
	if b == nil || state != "running" {
		// E2B's proxy, for a sandbox that is not running.
		msg := "The sandbox was not found"
		if state == "paused" {
			msg = "The sandbox is paused"
		}
		writeErr(w, http.StatusBadGateway, msg)
		return
	}
	if port == 49983 {
		s.serveEnvd(w, r, b)
		return
	}
	s.proxyPort(w, r, port)
}

// fault returns the fault a request meets, if any.
func (s *Server) fault(r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasPrefix(r.Host, "api.") {
		if f := s.limited(); f != nil {
			return f
		}
	}
	for _, f := range s.log.Faults {
		if f.Count > 0 && (f.Method == "" || f.Method == r.Method) && strings.Contains(r.URL.Path, f.PathContains) {
			f.Count--
			return f
		}
	}
	return nil
}

// validated runs handle between request and response validation against
// router's document.
func (s *Server) validated(w http.ResponseWriter, r *http.Request, router routers.Router, auth func(*http.Request) (int, string), handle func(w http.ResponseWriter, r *http.Request, op string, params map[string]string, body []byte)) {
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	vr := r.Clone(context.Background())
	vr.URL.Scheme, vr.URL.Host = "", ""
	vr.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := router.FindRoute(vr)
	if err != nil {
		s.violation("%s %s: no such operation: %v", r.Method, r.URL.Path, err)
		writeErr(w, http.StatusNotFound, "no such operation")
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		s.violation("%s %s: request: %v", r.Method, r.URL.Path, err)
		writeErr(w, http.StatusBadRequest, "request does not match the API: "+err.Error())
		return
	}
	rec := specfake.NewRecorder()
	if status, msg := auth(r); status != 0 {
		writeErr(rec, status, msg)
	} else if f := s.fault(r); f != nil {
		if f.After {
			vr.Body = io.NopCloser(bytes.NewReader(body))
			handle(specfake.NewRecorder(), vr, route.Operation.OperationID+" "+route.Method+" "+route.Path, params, body)
		}
		if f.RetryAfter != "" {
			rec.H.Set("Retry-After", f.RetryAfter)
		}
		writeErr(rec, f.Status, fmt.Sprintf("injected %d", f.Status))
	} else {
		vr.Body = io.NopCloser(bytes.NewReader(body))
		handle(rec, vr, route.Operation.OperationID+" "+route.Method+" "+route.Path, params, body)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Status, Header: rec.H,
		Options: &openapi3filter.Options{MultiError: true}}
	out.SetBodyBytes(rec.Body.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		s.violation("%s %s: response %d: %v", r.Method, r.URL.Path, rec.Status, err)
	}
	rec.Send(w)
}

// ---- control plane ----

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	auth := func(r *http.Request) (int, string) {
		if r.Header.Get("X-API-Key") != s.APIKey {
			return http.StatusUnauthorized, "Invalid API key, please visit the dashboard to get your API key"
		}
		return 0, ""
	}
	s.validated(w, r, s.apiRouter, auth, s.api)
}

func (s *Server) api(w http.ResponseWriter, r *http.Request, op string, params map[string]string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	_, route, _ := strings.Cut(op, " ")
	switch route {
	case "POST /sandboxes":
		s.create(w, body)
		if hold := s.hold.Ch; hold != nil {
			s.mu.Unlock()
			<-hold
			s.mu.Lock()
		}
		return
	case "GET /v2/sandboxes":
		s.list(w, r)
		return
	case "GET /snapshots":
		s.listSnapshots(w, r)
		return
	case "DELETE /templates/{templateID}":
		s.deleteTemplate(w, params["templateID"])
		return
	}
	b := s.sandboxes[params["sandboxID"]]
	if b == nil {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found", params["sandboxID"]))
		return
	}
	var in map[string]any
	json.Unmarshal(body, &in)
	now := s.now()
	switch route {
	case "GET /sandboxes/{sandboxID}":
		writeJSON(w, http.StatusOK, s.detail(b, true))
	case "DELETE /sandboxes/{sandboxID}":
		s.kill(b)
		w.WriteHeader(http.StatusNoContent)
	case "POST /sandboxes/{sandboxID}/pause":
		if b.state == "paused" {
			writeErr(w, http.StatusConflict, "sandbox is already paused")
			return
		}
		s.pause(b)
		w.WriteHeader(http.StatusNoContent)
	case "POST /sandboxes/{sandboxID}/connect":
		status := http.StatusOK
		if b.state == "paused" {
			s.resume(b)
			status = http.StatusCreated
		}
		if end := now.Add(seconds(in["timeout"])); end.After(b.endAt) {
			b.endAt = end
		}
		writeJSON(w, status, s.sandbox(b))
	case "POST /sandboxes/{sandboxID}/snapshots":
		s.snapshot(w, b, in)
	case "POST /sandboxes/{sandboxID}/timeout":
		b.endAt = now.Add(seconds(in["timeout"]))
		w.WriteHeader(http.StatusNoContent)
	default:
		writeErr(w, http.StatusNotImplemented, "the fake does not implement "+op)
	}
}

func seconds(v any) time.Duration {
	f, _ := v.(float64)
	return time.Duration(f) * time.Second
}

func (s *Server) create(w http.ResponseWriter, body []byte) {
	var req struct {
		TemplateID string            `json:"templateID"`
		Timeout    *int              `json:"timeout"`
		AutoPause  bool              `json:"autoPause"`
		Secure     bool              `json:"secure"`
		Internet   *bool             `json:"allow_internet_access"`
		Metadata   map[string]string `json:"metadata"`
		EnvVars    map[string]string `json:"envVars"`
	}
	json.Unmarshal(body, &req)
	if !s.Templates[strings.TrimPrefix(req.TemplateID, team+"/")] {
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("template '%s' not found", req.TemplateID))
		return
	}
	timeout := 15
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	s.seq++
	id := fmt.Sprintf("i%04dfake%010d", s.seq, s.now().UnixNano()%1e10)
	var created map[string]any
	json.Unmarshal(body, &created)
	b := &fsb{id: id, template: req.TemplateID, metadata: req.Metadata, env: req.EnvVars, autoPause: req.AutoPause, internet: req.Internet,
		state: "running", startedAt: s.now(), endAt: s.now().Add(time.Duration(timeout) * time.Second),
		procs: map[uint32]*proc{}, owned: map[string]bool{}, tmp: map[string]bool{}, created: created}
	if req.Secure {
		b.token = fmt.Sprintf("ea_token_%s", id)
	}
	if b.metadata == nil {
		b.metadata = map[string]string{}
	}
	s.sandboxes[id] = b
	if snap := s.snapshots[strings.TrimPrefix(req.TemplateID, team+"/")]; snap != nil {
		s.restoreFiles(b, snap)
	}
	writeJSON(w, http.StatusCreated, s.sandbox(b))
}

// sandbox is the Sandbox schema.
func (s *Server) sandbox(b *fsb) map[string]any {
	out := map[string]any{"templateID": b.template, "sandboxID": b.id, "clientID": "6532622b", "envdVersion": "0.2.4", "domain": Domain}
	if b.token != "" {
		out["envdAccessToken"] = b.token
	}
	return out
}

// detail is the SandboxDetail schema (ListedSandbox without the envd
// fields).
func (s *Server) detail(b *fsb, full bool) map[string]any {
	out := map[string]any{"templateID": b.template, "sandboxID": b.id, "clientID": "6532622b", "envdVersion": "0.2.4",
		"startedAt": b.startedAt.UTC().Format(time.RFC3339Nano), "endAt": b.endAt.UTC().Format(time.RFC3339Nano),
		"cpuCount": 2, "memoryMB": 512, "diskSizeMB": 512, "metadata": b.metadata, "state": b.state}
	if full {
		out["domain"] = Domain
		if b.token != "" {
			out["envdAccessToken"] = b.token
		}
		if b.internet != nil {
			out["allowInternetAccess"] = *b.internet
		}
	}
	return out
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, "invalid metadata filter: "+err.Error())
		return
	}
	states := map[string]bool{"running": true, "paused": true}
	if st := q.Get("state"); st != "" {
		states = map[string]bool{}
		for _, v := range strings.Split(st, ",") {
			states[v] = true
		}
	}
	var ids []string
	for id, b := range s.sandboxes {
		ok := states[b.state]
		for k := range want {
			if b.metadata[k] != want.Get(k) {
				ok = false
			}
		}
		if ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	limit := 100
	if l, err := strconv.Atoi(q.Get("limit")); err == nil {
		limit = l
	}
	start := 0
	if t := q.Get("nextToken"); t != "" {
		start = sort.SearchStrings(ids, t)
	}
	items := []any{}
	for i := start; i < len(ids) && len(items) < limit; i++ {
		items = append(items, s.detail(s.sandboxes[ids[i]], false))
		if len(items) == limit && i+1 < len(ids) {
			w.Header().Set("X-Next-Token", ids[i+1])
		}
	}
	writeJSON(w, http.StatusOK, items)
}

// expire applies timeouts that passed; callers hold s.mu.
func (s *Server) expire() {
	now := s.now()
	for _, b := range s.sandboxes {
		if b.state != "running" || now.Before(b.endAt) {
			continue
		}
		if b.autoPause {
			s.pause(b)
		} else {
			s.kill(b)
		}
	}
}

// pause stops a sandbox's processes; callers hold s.mu.
func (s *Server) pause(b *fsb) {
	b.state = "paused"
	for _, p := range b.procs {
		p.signal(stopSignal)
	}
}

// resume continues them; callers hold s.mu.
func (s *Server) resume(b *fsb) {
	b.state = "running"
	for _, p := range b.procs {
		p.signal(contSignal)
	}
}

// kill kills a sandbox's processes, removes its files and forgets it;
// callers hold s.mu.
func (s *Server) kill(b *fsb) {
	for _, p := range b.procs {
		p.signal(killSignal)
	}
	for top := range b.owned {
		os.RemoveAll(filepath.Join(s.Root, top))
	}
	for p := range b.tmp {
		os.Remove(p)
	}
	delete(s.sandboxes, b.id)
}

func (s *Server) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.sandboxes {
		s.kill(b)
	}
}

// confine refuses paths outside Root and records what a sandbox creates.
func (s *Server) confine(b *fsb, p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("path %q must be absolute in the fake", p)
	}
	c := filepath.Clean(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if filepath.Dir(c) == "/tmp" && strings.HasPrefix(filepath.Base(c), "agentctl-") {
		b.tmp[c] = true
		return nil
	}
	if c != s.Root && !strings.HasPrefix(c, s.Root+"/") {
		return fmt.Errorf("the fake confines sandbox paths to %s; got %s", s.Root, p)
	}
	rel := strings.TrimPrefix(c, s.Root+"/")
	top, _, _ := strings.Cut(rel, "/")
	if top != "" && c != s.Root {
		if _, err := os.Lstat(filepath.Join(s.Root, top)); err != nil {
			b.owned[top] = true
		}
	}
	return nil
}
