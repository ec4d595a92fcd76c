// Package runloopfake is an in-process fake of Runloop's devbox API for
// tests. Every request and response is validated against the API
// document in providers/runloop/testdata/spec, made strict (an object may
// hold only the properties its schema declares); a violation fails the
// test.
//
// It models the documented lifecycle (running, suspended, shutdown; a
// suspended devbox runs no commands until resumed, a shut-down one
// answers nothing), rate limits (429 with Retry-After) and injected
// faults. Commands really run, with /bin/sh on the host. Each devbox has
// a disk of its own, which it sees at Root (tests use workspace roots
// under it): its commands run in a mount namespace with the disk mounted
// there (so the fake needs unshare and mount namespaces; New skips the
// test without them). Disk snapshots are tars of the disk, unpacked into
// the disk of a devbox created from them. Outside Root a devbox sees the
// host, and its file API reaches only Root and the command files
// /tmp/agentctl-*.
package runloopfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/specfake"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Fault answers the next Count requests whose path contains PathContains
// with Status (and Retry-After when set).
type Fault struct {
	PathContains string
	Status       int
	RetryAfter   string
	Count        int
}

// Server is the fake.
type Server struct {
	t      testing.TB
	srv    *httptest.Server
	APIKey string
	// Root is where each devbox sees its own disk.
	Root string
	// Secrets are the account's secrets by name: a devbox created with
	// secrets {VAR = NAME} has NAME's value in $VAR.
	Secrets map[string]string
	router  routers.Router
	disks   string
	unshare []string

	mu         sync.Mutex
	devboxes   map[string]*devbox
	snapshots  []map[string]any
	snapTars   map[string]string
	log        specfake.Log[Fault]
	seq        int
	violations specfake.Violations
	// hold holds the answers to creates (HoldCreates).
	hold specfake.Holder
	// inject adds fields to the next response of an operation
	// (InjectResponseField).
	inject map[string]map[string]any
}

type devbox struct {
	view  map[string]any
	execs map[string]*execution
	// disk is the devbox's disk on the host ("" once shut down).
	disk string
	// env is the environment of its commands: its
	// environment_variables and its secrets' values.
	env []string
}

type execution struct {
	cmd    *exec.Cmd
	done   chan struct{}
	code   int
	stderr bytes.Buffer
}

// New starts a fake; it stops with the test, and reports spec violations
// then.
func New(t testing.TB) *Server {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(filepath.Dir(file), "..", "testdata", "spec", "openapi.yml"))
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = nil
	no := false
	for _, ref := range doc.Components.Schemas {
		sc := ref.Value
		if len(sc.Properties) > 0 && sc.AdditionalProperties.Has == nil && sc.AdditionalProperties.Schema == nil {
			sc.AdditionalProperties.Has = &no
		}
	}
	r, err := specfake.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	disks := t.TempDir()
	unshare, err := unshareArgs(filepath.Join(disks, "probe"))
	if err != nil {
		t.Skipf("runloopfake gives each devbox a disk of its own in a mount namespace, which this host cannot make: %v", err)
	}
	s := &Server{t: t, APIKey: "rl_test_key_0123456789abcdef", Root: root, router: r, disks: disks, unshare: unshare,
		Secrets: map[string]string{}, devboxes: map[string]*devbox{}, snapTars: map[string]string{}, inject: map[string]map[string]any{}}
	s.log.Mu = &s.mu
	s.hold.Mu = &s.mu
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, d := range s.devboxes {
			s.stopAll(d)
			s.awaitAll(d)
		}
		s.violations.Report(t, "runloopfake: spec violation")
	})
	return s
}

// URL is the fake's base URL (RUNLOOP_BASE_URL).
func (s *Server) URL() string { return s.srv.URL }

// Fail injects a fault.
func (s *Server) Fail(f Fault) {
	s.log.Fail(f)
}

// Requests returns "METHOD path" of every request served.
func (s *Server) Requests() []string {
	return s.log.Requests()
}

// Status returns a devbox's status ("" when unknown).
func (s *Server) Status(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.devboxes[id]; d != nil {
		return d.view["status"].(string)
	}
	return ""
}

// Devbox returns a copy of a devbox's view.
func (s *Server) Devbox(id string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]any{}
	if d := s.devboxes[id]; d != nil {
		for k, v := range d.view {
			out[k] = v
		}
	}
	return out
}

// Shutdown shuts a devbox down behind the client's back.
func (s *Server) Shutdown(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.devboxes[id]; d != nil {
		s.shutdown(d)
	}
}

// Live returns the ids of the devboxes not shut down, in creation order.
func (s *Server) Live() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i := 1; i <= s.seq; i++ {
		id := fmt.Sprintf("dbx_%04d", i)
		if d := s.devboxes[id]; d != nil && d.view["status"] != "shutdown" {
			out = append(out, id)
		}
	}
	return out
}

// Snapshots returns the ids of the disk snapshots, oldest first.
func (s *Server) Snapshots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, sn := range s.snapshots {
		out = append(out, sn["id"].(string))
	}
	return out
}

// HoldCreates makes the fake create devboxes but hold the answers until
// release is called (a client killed while it waits leaves a devbox it
// never learnt about).
func (s *Server) HoldCreates() (release func()) {
	return s.hold.Hold(s.t)
}

// InjectResponseField adds field = value to the body of the next
// successful answer to operation op (an operationId of the document), so
// tests can check that the response validation catches a field the
// document does not declare.
func (s *Server) InjectResponseField(op, field string, value any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inject[op] == nil {
		s.inject[op] = map[string]any{}
	}
	s.inject[op][field] = value
}

// Violations returns the spec violations so far and forgets them.
func (s *Server) Violations() []string { return s.violations.Take() }

func (s *Server) violation(format string, args ...any) { s.violations.Add(format, args...) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.log.Served = append(s.log.Served, r.Method+" "+r.URL.Path)
	var fault *Fault
	for _, f := range s.log.Faults {
		if f.Count > 0 && strings.Contains(r.URL.Path, f.PathContains) {
			f.Count--
			fault = f
			break
		}
	}
	s.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "invalid API key"})
		return
	}
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		s.violation("%s %s: no such operation: %v", r.Method, r.URL.Path, err)
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "not found"})
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		s.violation("request %s %s: %v", r.Method, r.URL.Path, err)
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	rec := specfake.NewRecorder()
	if fault != nil {
		if fault.RetryAfter != "" {
			rec.H.Set("Retry-After", fault.RetryAfter)
		}
		writeJSON(rec, fault.Status, map[string]any{"message": "injected fault"})
	} else {
		s.handle(rec, r, route.Operation.OperationID, params, body)
		s.injectFields(rec, route.Operation.OperationID)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Status, Header: rec.H,
		Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		s.violation("response to %s %s: %v", r.Method, r.URL.Path, err)
	}
	rec.Send(w)
}

// injectFields adds the fields InjectResponseField set for op to a
// successful JSON answer.
func (s *Server) injectFields(rec *specfake.Recorder, op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	extra := s.inject[op]
	if extra == nil || rec.Status != http.StatusOK || !strings.HasPrefix(rec.H.Get("Content-Type"), "application/json") {
		return
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		return
	}
	for k, x := range extra {
		v[k] = x
	}
	delete(s.inject, op)
	rec.Body.Reset()
	_ = json.NewEncoder(&rec.Body).Encode(v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, op string, params map[string]string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if op == "createDevbox" {
		s.create(w, body)
		if hold := s.hold.Ch; hold != nil {
			s.mu.Unlock()
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			s.mu.Lock()
		}
		return
	}
	if op == "listDevboxes" {
		s.list(w, r)
		return
	}
	if op == "listDiskSnapshots" || op == "deleteDiskSnapshot" {
		s.snapshotOp(w, r, op, params)
		return
	}
	id := params["id"]
	if id == "" {
		id = params["devbox_id"]
	}
	d := s.devboxes[id]
	if d == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "devbox " + id + " not found"})
		return
	}
	s.devboxOp(w, op, d, params, body, r)
}

func (s *Server) create(w http.ResponseWriter, body []byte) {
	var p map[string]any
	_ = json.Unmarshal(body, &p)
	sid, _ := p["snapshot_id"].(string)
	if sid != "" && s.snapshot(sid) == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "snapshot " + sid + " not found"})
		return
	}
	s.seq++
	id := fmt.Sprintf("dbx_%04d", s.seq)
	disk, err := s.newDisk(id, s.snapTars[sid])
	if err != nil {
		s.t.Errorf("%v", err)
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": err.Error()})
		return
	}
	meta, _ := p["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	lp, _ := p["launch_parameters"].(map[string]any)
	if lp == nil {
		lp = map[string]any{}
	}
	view := map[string]any{"id": id, "capabilities": []any{}, "create_time_ms": time.Now().UnixMilli(), "launch_parameters": lp,
		"metadata": meta, "state_transitions": []any{}, "status": "running"}
	for _, k := range []string{"blueprint_id", "snapshot_id", "name"} {
		if v, ok := p[k].(string); ok && v != "" {
			view[k] = v
		}
	}
	d := &devbox{view: view, execs: map[string]*execution{}, disk: disk, env: s.environment(p)}
	s.devboxes[id] = d
	writeJSON(w, http.StatusOK, view)
}

// environment is the environment of a devbox created with p: its
// environment_variables, and the values of the secrets it names; callers
// hold s.mu.
func (s *Server) environment(p map[string]any) []string {
	env := os.Environ()
	vars, _ := p["environment_variables"].(map[string]any)
	for k, v := range vars {
		env = append(env, k+"="+fmt.Sprint(v))
	}
	secrets, _ := p["secrets"].(map[string]any)
	for k, name := range secrets {
		if v, ok := s.Secrets[fmt.Sprint(name)]; ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	var out []any
	for i := 1; i <= s.seq; i++ {
		d := s.devboxes[fmt.Sprintf("dbx_%04d", i)]
		if d != nil && (status == "" || d.view["status"] == status) {
			out = append(out, d.view)
		}
	}
	if out == nil {
		out = []any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"devboxes": out, "has_more": false})
}

func (s *Server) setStatus(d *devbox, st string) {
	d.view["status"] = st
	d.view["state_transitions"] = append(d.view["state_transitions"].([]any), map[string]any{"status": st, "transition_time_ms": time.Now().UnixMilli()})
	if st == "shutdown" {
		d.view["end_time_ms"] = time.Now().UnixMilli()
		d.view["shutdown_reason"] = "api_shutdown"
	}
}

func (s *Server) stopAll(d *devbox) {
	for _, e := range d.execs {
		if e.cmd.Process != nil {
			_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// awaitAll waits (a while) for d's commands to end after stopAll.
func (s *Server) awaitAll(d *devbox) {
	limit := time.After(10 * time.Second)
	for _, e := range d.execs {
		select {
		case <-e.done:
		case <-limit:
			return
		}
	}
}

// shutdown ends d: its commands are killed and its disk removed; callers
// hold s.mu.
func (s *Server) shutdown(d *devbox) {
	s.setStatus(d, "shutdown")
	s.stopAll(d)
	s.awaitAll(d)
	if d.disk != "" {
		if err := os.RemoveAll(d.disk); err != nil {
			s.t.Errorf("runloopfake: removing the disk of %s: %v", d.view["id"], err)
		}
		d.disk = ""
	}
}

func (s *Server) devboxOp(w http.ResponseWriter, op string, d *devbox, params map[string]string, body []byte, r *http.Request) {
	st := d.view["status"].(string)
	if st == "shutdown" && op != "getDevbox" && op != "shutdownDevbox" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "devbox is shutdown"})
		return
	}
	switch op {
	case "getDevbox":
	case "shutdownDevbox":
		if st != "shutdown" {
			s.shutdown(d)
		}
	case "suspendDevbox":
		s.setStatus(d, "suspended")
		for _, e := range d.execs {
			if e.cmd.Process != nil {
				_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGSTOP)
			}
		}
	case "resumeDevbox":
		s.setStatus(d, "running")
		for _, e := range d.execs {
			if e.cmd.Process != nil {
				_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGCONT)
			}
		}
	case "enableTunnel":
		t := map[string]any{"auth_mode": "open", "create_time_ms": time.Now().UnixMilli(), "http_keep_alive": true, "tunnel_key": "tk-" + d.view["id"].(string), "wake_on_http": false}
		d.view["tunnel"] = t
		writeJSON(w, http.StatusOK, t)
		return
	default:
		if st != "running" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "devbox is " + st + ", not running"})
			return
		}
		s.running(w, op, d, params, body, r)
		return
	}
	writeJSON(w, http.StatusOK, d.view)
}

func (s *Server) running(w http.ResponseWriter, op string, d *devbox, params map[string]string, body []byte, r *http.Request) {
	var p map[string]any
	_ = json.Unmarshal(body, &p)
	switch op {
	case "keepAliveDevbox":
		writeJSON(w, http.StatusOK, map[string]any{})
	case "executeAsync":
		s.execute(w, d, p["command"].(string))
	case "waitForCommand", "killExecution":
		e := d.execs[params["execution_id"]]
		if e == nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "execution not found"})
			return
		}
		if op == "killExecution" && e.cmd.Process != nil {
			_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		}
		secs, _ := p["timeout_seconds"].(float64)
		s.mu.Unlock()
		select {
		case <-e.done:
		case <-time.After(time.Duration(secs) * time.Second):
		}
		s.mu.Lock()
		writeJSON(w, http.StatusOK, s.execView(d, params["execution_id"], e))
	case "uploadFile":
		s.upload(w, r, d, body)
	case "downloadFile":
		p, _ := p["path"].(string)
		hp, err := s.hostPath(d, p)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
			return
		}
		b, err := os.ReadFile(hp)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	case "snapshotDisk":
		name, _ := p["name"].(string)
		meta, _ := p["metadata"].(map[string]any)
		s.seq++
		id := fmt.Sprintf("snp_%04d", s.seq)
		file, err := s.snapshotTar(d, id)
		if err != nil {
			s.t.Errorf("%v", err)
			writeJSON(w, http.StatusInternalServerError, map[string]any{"message": err.Error()})
			return
		}
		snap := map[string]any{"id": id, "create_time_ms": time.Now().UnixMilli(), "metadata": meta, "source_devbox_id": d.view["id"], "name": name}
		s.snapshots = append(s.snapshots, snap)
		s.snapTars[id] = file
		writeJSON(w, http.StatusOK, snap)
	}
}

func (s *Server) execView(d *devbox, id string, e *execution) map[string]any {
	v := map[string]any{"devbox_id": d.view["id"], "execution_id": id, "status": "running"}
	select {
	case <-e.done:
		v["status"], v["exit_status"], v["stdout"], v["stderr"] = "completed", e.code, "", ""
	default:
	}
	return v
}

func (s *Server) execute(w http.ResponseWriter, d *devbox, command string) {
	s.seq++
	id := fmt.Sprintf("exe_%04d", s.seq)
	cmd := s.command(d, command)
	e := &execution{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &e.stderr
	if err := cmd.Start(); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": err.Error()})
		return
	}
	d.execs[id] = e
	go func() {
		err := cmd.Wait()
		e.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			e.code = ee.ExitCode()
			if e.code < 0 {
				e.code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
			}
		}
		if e.code == 125 && bytes.HasPrefix(e.stderr.Bytes(), []byte("runloopfake:")) {
			s.t.Errorf("%s", bytes.TrimSpace(e.stderr.Bytes()))
		}
		close(e.done)
	}()
	writeJSON(w, http.StatusOK, s.execView(d, id, e))
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, d *devbox, body []byte) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	form, err := multipart.NewReader(bytes.NewReader(body), params["boundary"]).ReadForm(1 << 30)
	if err != nil || len(form.Value["path"]) != 1 || len(form.File["file"]) != 1 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "want one path and one file"})
		return
	}
	p, err := s.hostPath(d, form.Value["path"][0])
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	f, _ := form.File["file"][0].Open()
	defer f.Close()
	data, _ := io.ReadAll(f)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) snapshot(id string) map[string]any {
	for _, sn := range s.snapshots {
		if sn["id"] == id {
			return sn
		}
	}
	return nil
}

func (s *Server) snapshotOp(w http.ResponseWriter, r *http.Request, op string, params map[string]string) {
	if op == "deleteDiskSnapshot" {
		for i, sn := range s.snapshots {
			if sn["id"] == params["id"] {
				s.snapshots = append(s.snapshots[:i], s.snapshots[i+1:]...)
				if err := os.Remove(s.snapTars[params["id"]]); err != nil {
					s.t.Errorf("runloopfake: removing snapshot %s: %v", params["id"], err)
				}
				delete(s.snapTars, params["id"])
				writeJSON(w, http.StatusOK, map[string]any{})
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "snapshot not found"})
		return
	}
	out := []any{}
	for _, sn := range s.snapshots {
		ok := true
		for k, v := range r.URL.Query() {
			if key, found := strings.CutPrefix(k, "metadata["); found {
				key = strings.TrimSuffix(key, "]")
				m, _ := sn["metadata"].(map[string]any)
				ok = ok && m[key] == v[0]
			}
		}
		if ok {
			out = append(out, sn)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"snapshots": out, "has_more": false})
}
