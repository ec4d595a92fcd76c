// Package fakedaytona is an in-process fake of the Daytona API and of a
// sandbox's toolbox daemon for tests. Every request and every response
// is validated against the published OpenAPI documents
// (vendored under testdata/ and embedded);
// a violation fails the test. It models the sandbox state machine
// (creating/pending_build → started → stopped → archived, error,
// build_failed, destroyed), sessions with asynchronous commands, files
// and preview links. Toolbox commands really run, with /bin/sh on the
// host: a sandbox's filesystem is the host's, confined to Root, so tests
// use workspace roots under Root; creating a folder elsewhere is refused
// with 400 "permission denied", as Daytona refuses the default snapshot's
// non-root user, and user-home-dir answers Home. The one exception is the client's
// transfer files: files named /tmp/agentctl-* (directly in /tmp, the
// sandbox's temporary directory) are allowed too, and removed with the
// sandbox if the client left them behind.
package fakedaytona

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
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

// Fault makes requests fail: the next Count requests whose method
// matches (empty = any) and whose path contains PathContains are answered
// with Status (and Retry-After when set).
type Fault struct {
	Method       string
	PathContains string
	Status       int
	RetryAfter   string
	Count        int
}

// Server is the fake.
type Server struct {
	t      testing.TB
	srv    *httptest.Server
	URL    string // API base: URL + "/api"
	APIKey string
	// Root confines every sandbox filesystem path.
	Root string
	// PollsToSettle is how many GETs a transitional state survives.
	PollsToSettle int
	// Home is what the toolbox's user-home-dir answers (default
	// Root/home/daytona). Sandboxes run as the non-root user daytona: a
	// folder outside Root (such as /workspace) cannot be created, and
	// the daemon answers 400 "permission denied", as Daytona's does.
	Home string

	apiRouter, tbRouter routers.Router
	// internal holds the fake's own files (accounts.go), outside Root.
	internal string

	mu         sync.Mutex
	sandboxes  map[string]*fsb
	log        specfake.Log[Fault]
	seq        int
	violations specfake.Violations
}

type fsb struct {
	dto      map[string]any
	state    string
	target   string // state a transitional state settles into
	polls    int
	sessions map[string]*session
	ptys     map[string]*ptySession
	owned    map[string]bool // top-level entries under Root it created
	tmp      map[string]bool // transfer files in /tmp it created
	deleted  bool
	// accounts holds the sandbox's passwd, group and the fake sudo
	// (accounts.go); "" until a command runs.
	accounts string
}

type session struct {
	cmds map[string]*command
}

type command struct {
	id, cmd        string
	stdout, stderr bytes.Buffer
	exit           *int
	proc           *exec.Cmd
	done           chan struct{}
	// stdin feeds an asynchronous command what send-input sends.
	stdin io.WriteCloser
}

var (
	specOnce sync.Once
	apiDoc   *openapi3.T
	tbDoc    *openapi3.T
	specErr  error
)

// The Daytona OpenAPI documents, vendored with their license under
// testdata/ (see testdata/README.md), so the fake needs nothing outside
// the repository.
var (
	//go:embed testdata/api.openapi.yaml
	apiYAML []byte
	//go:embed testdata/toolbox.openapi.yaml
	toolboxYAML []byte
)

func loadSpecs() {
	load := func(name string, data []byte) *openapi3.T {
		d, err := openapi3.NewLoader().LoadFromData(data)
		if err != nil {
			specErr = errors.Join(specErr, fmt.Errorf("fakedaytona: loading testdata/%s: %w", name, err))
			return nil
		}
		d.Servers = nil
		return d
	}
	apiDoc, tbDoc = load("api.openapi.yaml", apiYAML), load("toolbox.openapi.yaml", toolboxYAML)
}

// New starts a fake; it is closed, and checked for spec violations, when
// the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	specOnce.Do(loadSpecs)
	if specErr != nil {
		t.Fatal(specErr)
	}
	ar, err := specfake.NewRouter(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := specfake.NewRouter(tbDoc)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, APIKey: "dtn_test_key_0123456789", Root: root, Home: filepath.Join(root, "home", "daytona"), PollsToSettle: 2,
		apiRouter: ar, tbRouter: tr, sandboxes: map[string]*fsb{}, internal: t.TempDir()}
	s.log.Mu = &s.mu
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/api"
	t.Cleanup(func() {
		s.srv.Close()
		s.killAll()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.violations.Report(t, "fakedaytona: OpenAPI violation")
	})
	return s
}

// SetPollsToSettle changes PollsToSettle while the fake serves requests
// (a very large value holds sandboxes in their transitional states).
func (s *Server) SetPollsToSettle(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.PollsToSettle = n
}

// Fail installs a fault.
func (s *Server) Fail(f Fault) {
	s.log.Fail(f)
}

// Requests returns "METHOD path" of every request served so far.
func (s *Server) Requests() []string {
	return s.log.Requests()
}

// State returns a sandbox's state ("" if unknown).
func (s *Server) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[id]; b != nil {
		return b.state
	}
	return ""
}

// SetState forces a sandbox into state (e.g. archived, error) with reason.
func (s *Server) SetState(id, state, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[id]; b != nil {
		b.state, b.target = state, ""
		b.dto["errorReason"] = reason
	}
}

// Forget deletes a sandbox behind the client's back, files included.
func (s *Server) Forget(id string) {
	s.mu.Lock()
	b := s.sandboxes[id]
	delete(s.sandboxes, id)
	s.mu.Unlock()
	if b != nil {
		s.destroy(b)
	}
}

// Labels returns a sandbox's labels.
func (s *Server) Labels(id string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	if b := s.sandboxes[id]; b != nil {
		for k, v := range b.dto["labels"].(map[string]any) {
			out[k] = v.(string)
		}
	}
	return out
}

// Created returns the create request body of a sandbox.
func (s *Server) Created(id string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[id]; b != nil {
		return b.dto["_create"].(map[string]any)
	}
	return nil
}

// IDs returns the ids of live sandboxes (not deleted), sorted.
func (s *Server) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, b := range s.sandboxes {
		if !b.deleted {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (s *Server) violation(format string, args ...any) { s.violations.Add(format, args...) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	s.mu.Lock()
	s.log.Served = append(s.log.Served, r.Method+" "+r.URL.Path)
	var fault *Fault
	for _, f := range s.log.Faults {
		if f.Count > 0 && (f.Method == "" || f.Method == r.Method) && strings.Contains(r.URL.Path, f.PathContains) {
			f.Count--
			fault = f
			break
		}
	}
	s.mu.Unlock()

	var router routers.Router
	var inner string
	var sbxID string
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		router, inner = s.apiRouter, strings.TrimPrefix(r.URL.Path, "/api")
	case strings.HasPrefix(r.URL.Path, "/toolbox/"):
		rest := strings.TrimPrefix(r.URL.Path, "/toolbox/")
		id, ep, _ := strings.Cut(rest, "/")
		router, inner, sbxID = s.tbRouter, "/"+ep, id
	default:
		s.violation("%s %s: not an API or toolbox path", r.Method, r.URL.Path)
		writeErr(w, 404, "not found")
		return
	}
	// Validate the request against the document.
	vr := r.Clone(context.Background())
	vr.URL.Path, vr.URL.RawPath = inner, ""
	vr.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := router.FindRoute(vr)
	if err != nil {
		s.violation("%s %s: no such operation: %v", r.Method, inner, err)
		writeErr(w, 404, "no such operation")
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		s.violation("%s %s: request: %v", r.Method, inner, err)
		writeErr(w, 400, "request does not match the API: "+err.Error())
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		writeErr(w, 401, "Invalid credentials")
		return
	}
	if fault != nil {
		if fault.RetryAfter != "" {
			w.Header().Set("Retry-After", fault.RetryAfter)
		}
		writeErr(w, fault.Status, fmt.Sprintf("injected %d", fault.Status))
		return
	}
	if sbxID != "" && route.Operation.OperationID == "ConnectPtySession" {
		// A WebSocket: served on the connection itself.
		s.connectPty(w, r, sbxID, params)
		return
	}
	rec := specfake.NewRecorder()
	vr.Body = io.NopCloser(bytes.NewReader(body))
	if sbxID != "" {
		s.toolbox(rec, vr, sbxID, route.Operation.OperationID, params, body)
	} else {
		s.api(rec, vr, route.Operation.OperationID, params, body)
	}
	// Validate the response (error statuses are not declared by the documents).
	if rec.Status < 400 && rec.H.Get("X-Fake-Skip-Validation") == "" {
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Status, Header: rec.H,
			Options: &openapi3filter.Options{MultiError: true}}
		out.SetBodyBytes(rec.Body.Bytes())
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			s.violation("%s %s: response %d: %v", r.Method, inner, rec.Status, err)
		}
	}
	rec.H.Del("X-Fake-Skip-Validation")
	rec.Send(w)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"statusCode": status, "message": msg, "error": http.StatusText(status)})
}

// ---- API ----

func (s *Server) api(w http.ResponseWriter, r *http.Request, op string, params map[string]string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if op == "createSandbox" {
		s.create(w, body)
		return
	}
	if op == "listSandboxes" {
		var filter map[string]string
		if l := r.URL.Query().Get("labels"); l != "" {
			json.Unmarshal([]byte(l), &filter)
		}
		items := []any{}
		for _, b := range s.sandboxes {
			ok := true
			for k, v := range filter {
				if lv, _ := b.dto["labels"].(map[string]any)[k].(string); lv != v {
					ok = false
				}
			}
			if ok {
				items = append(items, s.view(b, true))
			}
		}
		writeJSON(w, 200, map[string]any{"items": items, "nextCursor": nil})
		return
	}
	id := params["sandboxIdOrName"]
	if id == "" {
		id = params["sandboxId"]
	}
	b := s.sandboxes[id]
	if b == nil {
		writeErr(w, 404, fmt.Sprintf("Sandbox with ID or name %s not found", id))
		return
	}
	switch op {
	case "getSandbox":
		if b.deleted {
			delete(s.sandboxes, id)
			s.killSessions(b)
			s.removeFiles(b)
			writeErr(w, 404, fmt.Sprintf("Sandbox with ID or name %s not found", id))
			return
		}
		s.advance(b)
	case "startSandbox":
		switch b.state {
		case "started", "starting":
		case "stopped", "archived", "paused":
			b.state, b.target, b.polls = "starting", "started", 0
			if b.dto["_archived"] == true {
				b.state = "restoring"
			}
		default:
			writeErr(w, 409, "Sandbox is not in a state that can be started: "+b.state)
			return
		}
	case "stopSandbox":
		switch b.state {
		case "stopped", "stopping":
		case "started":
			b.state, b.target, b.polls = "stopping", "stopped", 0
		default:
			writeErr(w, 409, "Sandbox is not started: "+b.state)
			return
		}
	case "deleteSandbox":
		b.state, b.deleted = "destroying", true
		s.killSessions(b)
		s.removeFiles(b)
	case "getSignedPortPreviewUrl", "getPortPreviewUrl":
		port, _ := strconv.Atoi(params["port"])
		tok := fmt.Sprintf("tok%06d", s.seq)
		s.seq++
		if op == "getPortPreviewUrl" {
			writeJSON(w, 200, map[string]any{"sandboxId": id, "url": fmt.Sprintf("https://%d-%s.preview.example", port, id), "token": tok})
			return
		}
		writeJSON(w, 200, map[string]any{"sandboxId": id, "port": port, "token": tok, "url": fmt.Sprintf("https://%d-%s.preview.example", port, tok)})
		return
	default:
		writeErr(w, 501, "the fake does not implement "+op)
		return
	}
	writeJSON(w, 200, s.view(b, false))
}

func (s *Server) create(w http.ResponseWriter, body []byte) {
	var req map[string]any
	json.Unmarshal(body, &req)
	if snap, _ := req["snapshot"].(string); snap != "" {
		for _, k := range []string{"cpu", "memory", "disk", "gpu"} {
			if _, ok := req[k]; ok {
				writeErr(w, 400, "Cannot specify Sandbox resources when using a snapshot")
				return
			}
		}
		if _, ok := req["buildInfo"]; ok {
			writeErr(w, 400, "Cannot specify both snapshot and buildInfo")
			return
		}
	}
	s.seq++
	id := fmt.Sprintf("sbx-%04d", s.seq)
	labels := map[string]any{}
	if l, ok := req["labels"].(map[string]any); ok {
		labels = l
	}
	env := map[string]any{}
	if e, ok := req["env"].(map[string]any); ok {
		env = e
	}
	num := func(k string, d float64) float64 {
		if v, ok := req[k].(float64); ok {
			return v
		}
		return d
	}
	now := time.Now().UTC().Format(time.RFC3339)
	dto := map[string]any{
		"id": id, "name": id, "organizationId": "org-fake", "user": "daytona", "env": env, "labels": labels,
		"public": req["public"] == true, "networkBlockAll": req["networkBlockAll"] == true, "target": "us",
		"cpu": num("cpu", 1), "gpu": num("gpu", 0), "memory": num("memory", 1), "disk": num("disk", 3),
		"toolboxProxyUrl": s.srv.URL + "/toolbox", "createdAt": now, "updatedAt": now,
		"autoStopInterval": num("autoStopInterval", 15), "autoArchiveInterval": num("autoArchiveInterval", 10080),
		"autoDeleteInterval": num("autoDeleteInterval", -1), "_create": req,
	}
	if v, ok := req["networkAllowList"].(string); ok {
		dto["networkAllowList"] = v
	}
	b := &fsb{dto: dto, state: "creating", target: "started", sessions: map[string]*session{}, owned: map[string]bool{}, tmp: map[string]bool{}}
	if snap, ok := req["snapshot"].(string); ok {
		dto["snapshot"] = snap
	}
	if bi, ok := req["buildInfo"].(map[string]any); ok {
		df, _ := bi["dockerfileContent"].(string)
		dto["buildInfo"] = map[string]any{"dockerfileContent": df, "snapshotRef": "fake-build-" + id, "createdAt": now, "updatedAt": now}
		b.state = "pending_build"
		if strings.Contains(df, "FROM fail") {
			b.target = "build_failed"
			dto["errorReason"] = "failed to pull image " + strings.TrimPrefix(df, "FROM ")
		}
	}
	s.sandboxes[id] = b
	writeJSON(w, 200, s.view(b, false))
}

// advance settles transitional states after PollsToSettle GETs.
func (s *Server) advance(b *fsb) {
	if b.target == "" || b.state == b.target {
		return
	}
	b.polls++
	if b.polls < s.PollsToSettle {
		return
	}
	if b.state == "pending_build" && b.target != "build_failed" {
		b.state, b.polls = "creating", 0
		return
	}
	b.state, b.target, b.polls = b.target, "", 0
	if b.state == "build_failed" || b.state == "error" {
		return
	}
}

func (s *Server) view(b *fsb, list bool) map[string]any {
	out := map[string]any{}
	for k, v := range b.dto {
		if strings.HasPrefix(k, "_") || (list && (k == "env" || k == "networkBlockAll" || k == "buildInfo" || k == "networkAllowList")) {
			continue
		}
		out[k] = v
	}
	out["state"] = b.state
	if b.state == "started" {
		out["desiredState"] = "started"
	}
	return out
}

// ---- toolbox ----

func (s *Server) toolbox(w http.ResponseWriter, r *http.Request, id, op string, params map[string]string, body []byte) {
	s.mu.Lock()
	b := s.sandboxes[id]
	state := ""
	if b != nil {
		state = b.state
	}
	s.mu.Unlock()
	if b == nil || b.deleted {
		writeErr(w, 404, "sandbox not found")
		return
	}
	if state != "started" {
		writeErr(w, 400, "sandbox is not running (state "+state+")")
		return
	}
	q := r.URL.Query()
	p := q.Get("path")
	if p != "" {
		if err := s.confine(b, p); err != nil {
			if op == "CreateFolder" {
				writeErr(w, 400, fmt.Sprintf("mkdir %s: permission denied (%v)", p, err))
				return
			}
			writeErr(w, 403, err.Error())
			return
		}
	}
	switch op {
	case "GetUserHomeDir":
		writeJSON(w, 200, map[string]any{"dir": s.Home})
	case "GetFileInfo":
		fi, err := os.Stat(p)
		if err != nil {
			fsErr(w, err)
			return
		}
		writeJSON(w, 200, fileInfo(fi))
	case "ListFiles":
		ents, err := os.ReadDir(p)
		if err != nil {
			fsErr(w, err)
			return
		}
		out := []any{}
		for _, e := range ents {
			fi, err := os.Stat(filepath.Join(p, e.Name()))
			if err != nil {
				continue
			}
			out = append(out, fileInfo(fi))
		}
		writeJSON(w, 200, out)
	case "DownloadFile":
		data, err := os.ReadFile(p)
		if err != nil {
			fsErr(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(200)
		w.Write(data)
	case "UploadFile":
		mr, err := multipartFile(r, body)
		if err != nil {
			writeErr(w, 400, err.Error())
			return
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, mr, 0o644); err != nil {
			fsErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]any{})
	case "UploadFiles":
		if err := s.bulkUpload(b, r, body); err != nil {
			writeErr(w, 400, err.Error())
			return
		}
		writeJSON(w, 200, map[string]any{})
	case "CreateFolder":
		m, err := strconv.ParseUint(q.Get("mode"), 8, 32)
		if err != nil {
			writeErr(w, 400, "invalid mode")
			return
		}
		if err := os.MkdirAll(p, os.FileMode(m)); err != nil {
			fsErr(w, err)
			return
		}
		w.WriteHeader(201)
	case "DeleteFile":
		var err error
		if q.Get("recursive") == "true" {
			err = os.RemoveAll(p)
		} else {
			err = os.Remove(p)
		}
		if err != nil {
			fsErr(w, err)
			return
		}
		w.WriteHeader(204)
	case "SetFilePermissions":
		m, err := strconv.ParseUint(q.Get("mode"), 8, 32)
		if err != nil {
			writeErr(w, 400, "invalid mode")
			return
		}
		if err := os.Chmod(p, os.FileMode(m)); err != nil {
			fsErr(w, err)
			return
		}
		w.WriteHeader(200)
	case "ExecuteCommand":
		s.execute(w, b, body)
	case "CreateSession":
		var req struct{ SessionID string }
		json.Unmarshal(body, &req)
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := b.sessions[req.SessionID]; ok {
			writeErr(w, 409, "session already exists")
			return
		}
		b.sessions[req.SessionID] = &session{cmds: map[string]*command{}}
		w.WriteHeader(201)
	case "DeleteSession":
		s.mu.Lock()
		ss := b.sessions[params["sessionId"]]
		delete(b.sessions, params["sessionId"])
		s.mu.Unlock()
		if ss == nil {
			writeErr(w, 404, "session not found")
			return
		}
		killSession(ss)
		w.WriteHeader(204)
	case "SessionExecuteCommand":
		s.sessionExec(w, b, params["sessionId"], body)
	case "CreatePtySession":
		s.createPty(w, b, body)
	case "DeletePtySession":
		s.deletePty(w, b, params)
	case "SendInput":
		c := s.sessionCommand(b, params)
		if c == nil {
			writeErr(w, 404, "session or command not found")
			return
		}
		var in struct {
			Data string `json:"data"`
		}
		json.Unmarshal(body, &in)
		select {
		case <-c.done:
			writeErr(w, 400, "command has exited")
			return
		default:
		}
		if c.stdin == nil {
			writeErr(w, 400, "command does not read input")
			return
		}
		if _, err := io.WriteString(c.stdin, in.Data); err != nil {
			writeErr(w, 400, "writing input: "+err.Error())
			return
		}
		w.WriteHeader(204)
	case "GetSessionCommand", "GetSessionCommandLogs":
		c := s.sessionCommand(b, params)
		if c == nil {
			writeErr(w, 404, "session or command not found")
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if op == "GetSessionCommand" {
			out := map[string]any{"id": c.id, "command": c.cmd}
			if c.exit != nil {
				out["exitCode"] = *c.exit
			}
			writeJSON(w, 200, out)
			return
		}
		if !newSDK(r) {
			w.Header().Set("X-Fake-Skip-Validation", "1")
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(200)
			io.WriteString(w, c.stdout.String()+c.stderr.String())
			return
		}
		writeJSON(w, 200, map[string]any{"output": c.stdout.String() + c.stderr.String(), "stdout": c.stdout.String(), "stderr": c.stderr.String()})
	default:
		writeErr(w, 501, "the fake does not implement "+op)
	}
}

// newSDK reports whether the client's SDK version is >= 0.167.0, the
// daemon's switch for JSON logs with separate streams.
func newSDK(r *http.Request) bool {
	v := strings.Split(r.Header.Get("X-Daytona-SDK-Version"), ".")
	if len(v) < 2 {
		return false
	}
	major, _ := strconv.Atoi(v[0])
	minor, _ := strconv.Atoi(v[1])
	return major > 0 || minor >= 167
}

func fsErr(w http.ResponseWriter, err error) {
	switch {
	case os.IsNotExist(err):
		writeErr(w, 404, err.Error())
	case os.IsPermission(err):
		writeErr(w, 403, err.Error())
	default:
		writeErr(w, 400, err.Error())
	}
}

func fileInfo(fi os.FileInfo) map[string]any {
	st, _ := fi.Sys().(*syscall.Stat_t)
	owner, group := "0", "0"
	if st != nil {
		owner, group = strconv.Itoa(int(st.Uid)), strconv.Itoa(int(st.Gid))
	}
	return map[string]any{"name": fi.Name(), "size": fi.Size(), "mode": fi.Mode().String(), "modTime": fi.ModTime().String(),
		"modifiedAt": fi.ModTime().Format(time.RFC3339Nano), "isDir": fi.IsDir(), "owner": owner, "group": group,
		"permissions": fmt.Sprintf("%04o", fi.Mode().Perm())}
}

// confine refuses paths outside Root and records what a sandbox creates.
func (s *Server) confine(b *fsb, p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("path %q must be absolute in the fake", p)
	}
	c := filepath.Clean(p)
	if filepath.Dir(c) == "/tmp" && strings.HasPrefix(filepath.Base(c), "agentctl-") {
		s.mu.Lock()
		b.tmp[c] = true
		s.mu.Unlock()
		return nil
	}
	if c != s.Root && !strings.HasPrefix(c, s.Root+"/") {
		return fmt.Errorf("the fake confines sandbox paths to %s; got %s", s.Root, p)
	}
	rel := strings.TrimPrefix(c, s.Root+"/")
	top, _, _ := strings.Cut(rel, "/")
	if top != "" && c != s.Root {
		s.mu.Lock()
		if _, err := os.Lstat(filepath.Join(s.Root, top)); err != nil {
			b.owned[top] = true
		}
		s.mu.Unlock()
	}
	return nil
}

func multipartFile(r *http.Request, body []byte) ([]byte, error) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err := r.ParseMultipartForm(64 << 20); err != nil {
		return nil, err
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func (s *Server) bulkUpload(b *fsb, r *http.Request, body []byte) error {
	_, params, err := mimeParams(r.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	dests := map[string]string{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := part.FormName()
		idx := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "files["), "].path"), "].file")
		data, _ := io.ReadAll(part)
		if strings.HasSuffix(name, ".path") {
			dests[idx] = string(data)
			continue
		}
		dest, ok := dests[idx]
		if !ok {
			return fmt.Errorf("file[%s]: missing .path", idx)
		}
		if err := s.confine(b, dest); err != nil {
			return err
		}
		os.MkdirAll(filepath.Dir(dest), 0o755)
		if err := os.WriteFile(dest, data, 0o644); err != nil {
			return err
		}
	}
}

func mimeParams(ct string) (string, map[string]string, error) {
	parts := strings.Split(ct, ";")
	params := map[string]string{}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		params[k] = strings.Trim(v, `"`)
	}
	if params["boundary"] == "" {
		return "", nil, fmt.Errorf("no multipart boundary")
	}
	return parts[0], params, nil
}

// parseCommand splits like the daemon: spaces separate, single or double
// quotes group, no escapes.
func parseCommand(command string) []string {
	var args []string
	var cur strings.Builder
	var quote rune
	has := false
	for _, r := range command {
		switch {
		case (r == '"' || r == '\'') && quote == 0:
			quote, has = r, true
		case r == quote:
			quote = 0
		case r == ' ' && quote == 0:
			if cur.Len() > 0 || has {
				args = append(args, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 || has {
		args = append(args, cur.String())
	}
	return args
}

func (s *Server) execute(w http.ResponseWriter, b *fsb, body []byte) {
	var req struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd"`
		Envs    map[string]string `json:"envs"`
		Timeout int               `json:"timeout"`
	}
	json.Unmarshal(body, &req)
	argv := parseCommand(req.Command)
	if len(argv) == 0 {
		writeErr(w, 400, "empty command")
		return
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.Root
	if req.Cwd != "" {
		if err := s.confine(b, req.Cwd); err != nil {
			writeErr(w, 400, err.Error())
			return
		}
		cmd.Dir = req.Cwd
	}
	cmd.Env = s.commandEnv(b, req.Envs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	timeout := 360 * time.Second
	if req.Timeout > 0 {
		timeout = time.Duration(req.Timeout) * time.Second
	}
	if err := cmd.Start(); err != nil {
		writeJSON(w, 200, map[string]any{"exitCode": -1, "result": err.Error()})
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		writeErr(w, 408, "command execution timeout")
		return
	}
	writeJSON(w, 200, map[string]any{"exitCode": cmd.ProcessState.ExitCode(), "result": out.String()})
}

// sessionCommand is the command of a session the path names, nil when
// either is unknown.
func (s *Server) sessionCommand(b *fsb, params map[string]string) *command {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := b.sessions[params["sessionId"]]; ss != nil {
		return ss.cmds[params["commandId"]]
	}
	return nil
}

func (s *Server) sessionExec(w http.ResponseWriter, b *fsb, sid string, body []byte) {
	var req struct {
		Command  string `json:"command"`
		RunAsync bool   `json:"runAsync"`
		Async    bool   `json:"async"`
	}
	json.Unmarshal(body, &req)
	s.mu.Lock()
	ss := b.sessions[sid]
	if ss == nil {
		s.mu.Unlock()
		writeErr(w, 404, "session not found")
		return
	}
	s.seq++
	c := &command{id: fmt.Sprintf("cmd-%d", s.seq), cmd: req.Command, done: make(chan struct{})}
	ss.cmds[c.id] = c
	s.mu.Unlock()
	cmd := exec.Command("/bin/sh", "-c", req.Command)
	cmd.Dir = s.Root
	cmd.Env = s.commandEnv(b, nil)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = &lockedWriter{mu: &s.mu, b: &c.stdout}, &lockedWriter{mu: &s.mu, b: &c.stderr}
	c.proc = cmd
	if req.RunAsync || req.Async {
		// An asynchronous command reads what send-input sends.
		in, err := cmd.StdinPipe()
		if err != nil {
			writeErr(w, 500, err.Error())
			return
		}
		c.stdin = in
	}
	if err := cmd.Start(); err != nil {
		writeErr(w, 400, err.Error())
		return
	}
	go func() {
		cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		s.mu.Lock()
		c.exit = &code
		s.mu.Unlock()
		close(c.done)
	}()
	if req.RunAsync || req.Async {
		writeJSON(w, 202, map[string]any{"cmdId": c.id})
		return
	}
	<-c.done
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, 200, map[string]any{"cmdId": c.id, "exitCode": *c.exit, "output": c.stdout.String() + c.stderr.String(), "stdout": c.stdout.String(), "stderr": c.stderr.String()})
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func killSession(ss *session) {
	for _, c := range ss.cmds {
		if c.proc != nil && c.proc.Process != nil {
			syscall.Kill(-c.proc.Process.Pid, syscall.SIGKILL)
		}
	}
}

func (s *Server) killSessions(b *fsb) {
	for _, ss := range b.sessions {
		killSession(ss)
	}
	for _, ps := range b.ptys {
		killPty(ps)
	}
}

func (s *Server) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.sandboxes {
		s.killSessions(b)
		for p := range b.tmp {
			os.Remove(p)
		}
	}
}

// destroy kills a sandbox's commands and removes its files.
func (s *Server) destroy(b *fsb) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killSessions(b)
	s.removeFiles(b)
}

// removeFiles removes what a sandbox created under Root and its transfer
// files in /tmp; callers hold s.mu.
func (s *Server) removeFiles(b *fsb) {
	for top := range b.owned {
		os.RemoveAll(filepath.Join(s.Root, top))
	}
	for p := range b.tmp {
		os.Remove(p)
	}
	b.owned, b.tmp = map[string]bool{}, map[string]bool{}
}
