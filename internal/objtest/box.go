package objtest

import (
	"bytes"
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// boxSpecJSON is Box's OpenAPI document, vendored with its license under
// testdata/box (see testdata/box/README.md).
//
//go:embed testdata/box/openapi.json
var boxSpecJSON []byte

var boxRouterOnce = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(boxSpecJSON)
	if err != nil {
		return nil, fmt.Errorf("objtest: loading testdata/box/openapi.json: %w", err)
	}
	// Requests are routed by their path below the API's base (/2.0 on
	// api.box.com, /api/2.0 on upload.box.com), whichever host serves it.
	doc.Servers = nil
	for _, item := range doc.Paths.Map() {
		item.Servers = nil
		for _, op := range item.Operations() {
			op.Servers = nil
		}
	}
	return legacy.NewRouter(doc, openapi3.DisableExamplesValidation())
})

// Box is a running Box API (api.box.com and upload.box.com) for one
// user, reached through an Impersonation: every request is validated
// against Box's OpenAPI document, and must carry the user's access token
// (Authorization: Bearer). It serves what a read-only rclone mount
// needs: folder listings, file downloads and the user (for df).
type Box struct {
	// Token is the access token the service accepts.
	Token string
	// Env is the environment that sends a client's https requests for
	// api.box.com and upload.box.com here.
	Env []string

	mu         sync.Mutex
	items      map[string]*boxItem
	nextID     int
	violations []string
	// Refused counts the requests refused for their token.
	Refused atomic.Int64
}

type boxItem struct {
	id, name, parent, typ string
	data                  []byte
	modified              time.Time
}

// StartBox starts the service; it stops when the test ends, which fails
// if a request broke Box's OpenAPI document.
func StartBox(t testing.TB) *Box {
	t.Helper()
	if _, err := boxRouterOnce(); err != nil {
		t.Fatal(err)
	}
	b := &Box{Token: "objtest-box-" + randomHex(12), nextID: 1000,
		items: map[string]*boxItem{"0": {id: "0", name: "All Files", typ: "folder", modified: time.Now().UTC()}}}
	imp := Impersonate(t, b, "api.box.com", "upload.box.com")
	b.Env = imp.Env
	t.Cleanup(func() {
		for _, v := range b.Violations() {
			t.Errorf("Box API request outside its OpenAPI document: %s", v)
		}
	})
	return b
}

// Violations are the requests that broke the document.
func (b *Box) Violations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.violations...)
}

// Folder makes a folder in parent and returns its id.
func (b *Box) Folder(parent, name string) string {
	return b.add(parent, name, "folder", nil)
}

// File makes a file in parent and returns its id.
func (b *Box) File(parent, name, content string) string {
	return b.add(parent, name, "file", []byte(content))
}

func (b *Box) add(parent, name, typ string, data []byte) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	id := strconv.Itoa(b.nextID)
	b.items[id] = &boxItem{id: id, name: name, parent: parent, typ: typ, data: data, modified: time.Now().UTC().Truncate(time.Second)}
	return id
}

// ServeHTTP validates a request against the document, checks its token
// and serves it.
func (b *Box) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		boxError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	route, params, err := b.validate(r, body)
	if err != nil {
		b.mu.Lock()
		b.violations = append(b.violations, fmt.Sprintf("%s %s%s: %v", r.Method, r.Host, r.URL.RequestURI(), err))
		b.mu.Unlock()
		boxError(w, http.StatusBadRequest, "bad_request", "The request is not one of the Box API: "+err.Error())
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+b.Token {
		b.Refused.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="Service", error="invalid_token", error_description="The access token provided is invalid."`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	b.serve(w, r, route.Operation.OperationID, params)
}

// validate finds the request's operation in the document and checks the
// request against it.
func (b *Box) validate(r *http.Request, body []byte) (*routers.Route, map[string]string, error) {
	router, _ := boxRouterOnce()
	base := "/2.0"
	if r.Host == "upload.box.com" {
		base = "/api/2.0"
	}
	rest, ok := strings.CutPrefix(r.URL.Path, base+"/")
	if !ok {
		return nil, nil, fmt.Errorf("the path is not below %s%s", r.Host, base)
	}
	vr := r.Clone(context.Background())
	// Box answers "/files/content/" as "/files/content" (rclone's
	// pre-upload check sends the slash).
	vr.URL.Path, vr.URL.RawPath = "/"+strings.TrimSuffix(rest, "/"), ""
	vr.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := router.FindRoute(vr)
	if err != nil {
		return nil, nil, fmt.Errorf("no operation: %w", err)
	}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return nil, nil, err
	}
	return route, params, nil
}

func boxError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "status": status, "code": code, "message": msg, "request_id": "objtest"})
}

// serve answers an authorized request of operation op.
func (b *Box) serve(w http.ResponseWriter, r *http.Request, op string, params map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch op {
	case "get_folders_id_items":
		f := b.items[params["folder_id"]]
		if f == nil || f.typ != "folder" {
			boxError(w, http.StatusNotFound, "not_found", "Not Found")
			return
		}
		var entries []map[string]any
		for _, it := range b.items {
			if it.parent == f.id && it.id != "0" {
				entries = append(entries, it.json())
			}
		}
		writeBoxJSON(w, http.StatusOK, map[string]any{"total_count": len(entries), "entries": entries, "limit": 1000, "offset": 0})
	case "get_files_id_content":
		f := b.items[params["file_id"]]
		if f == nil || f.typ != "file" {
			boxError(w, http.StatusNotFound, "not_found", "Not Found")
			return
		}
		data, status := f.data, http.StatusOK
		if start, end, ok := parseRange(r.Header.Get("Range"), len(data)); ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
			data, status = data[start:end+1], http.StatusPartialContent
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(status)
		w.Write(data)
	case "get_users_me":
		writeBoxJSON(w, http.StatusOK, map[string]any{"type": "user", "id": "1", "name": "Objtest", "login": "objtest@example.com",
			"space_amount": 10 << 30, "space_used": 1 << 20, "max_upload_size": 2 << 30})
	default:
		boxError(w, http.StatusNotImplemented, "not_implemented", "The test service does not implement "+op+".")
	}
}

func (it *boxItem) json() map[string]any {
	at := it.modified.Format(time.RFC3339)
	m := map[string]any{"type": it.typ, "id": it.id, "sequence_id": "0", "etag": "0", "name": it.name,
		"size": len(it.data), "created_at": at, "modified_at": at, "content_created_at": at, "content_modified_at": at,
		"item_status": "active"}
	if it.typ == "file" {
		sum := sha1.Sum(it.data)
		m["sha1"] = hex.EncodeToString(sum[:])
	}
	return m
}

func writeBoxJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
