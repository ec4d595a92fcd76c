package objtest

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Azure is a running Azure Blob Storage service for one storage account:
// every request is checked against the vendored Blob service
// specification (an operation of it, with its parameters) and must be
// signed with the account key (Shared Key) or carry a shared access
// signature the key signed. It serves what rclone needs of it: listing,
// reading, writing (staged blocks and their commit) and deleting blobs.
type Azure struct {
	// URL is the account's endpoint, path style:
	// http://127.0.0.1:PORT/ACCOUNT.
	URL     string
	Account string
	// Key is the account key (base64).
	Key  string
	spec *AzureSpec
	key  []byte

	mu         sync.Mutex
	containers map[string]map[string]*azureBlob
	blocks     map[string][]byte // container/blob/blockid
	violations []string
	// Refused counts the requests refused for their credentials.
	Refused atomic.Int64
}

type azureBlob struct {
	data     []byte
	ctype    string
	meta     map[string]string
	modified time.Time
	etag     string
}

// NewAzure returns the service of one account; serve its Handler.
func NewAzure(account, key string) (*Azure, error) {
	spec, err := LoadAzureSpec()
	if err != nil {
		return nil, err
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("the account key is not base64: %w", err)
	}
	return &Azure{Account: account, Key: key, key: raw, spec: spec,
		containers: map[string]map[string]*azureBlob{}, blocks: map[string][]byte{}}, nil
}

// StartAzure starts the service of account on 127.0.0.1; it stops when
// the test ends, which fails if a request broke the specification.
func StartAzure(t testing.TB, account, key string) *Azure {
	t.Helper()
	a, err := NewAzure(account, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	a.URL = srv.URL + "/" + account
	t.Cleanup(func() {
		srv.Close()
		for _, v := range a.Violations() {
			t.Errorf("Azure Blob request outside the specification: %s", v)
		}
	})
	return a
}

// Violations are the requests that broke the specification.
func (a *Azure) Violations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.violations...)
}

// CreateContainer makes an empty container.
func (a *Azure) CreateContainer(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.containers[name] == nil {
		a.containers[name] = map[string]*azureBlob{}
	}
}

// Put stores a blob.
func (a *Azure) Put(container, name, content string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.containers[container][name] = newAzureBlob([]byte(content), "text/plain", nil)
}

// Get returns a blob's content and whether it exists.
func (a *Azure) Get(container, name string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.containers[container][name]
	if !ok {
		return "", false
	}
	return string(b.data), true
}

func newAzureBlob(data []byte, ctype string, meta map[string]string) *azureBlob {
	sum := md5.Sum(data)
	return &azureBlob{data: data, ctype: ctype, meta: meta, modified: time.Now().UTC(), etag: fmt.Sprintf(`"0x%X"`, sum[:8])}
}

// ServeHTTP checks a request against the specification and the
// account's credentials, then serves it.
func (a *Azure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	if !strings.HasPrefix(r.Host, a.Account+".") { // path style: /ACCOUNT/container/blob
		rest, ok := strings.CutPrefix(path, "/"+a.Account)
		if !ok || (rest != "" && rest[0] != '/') {
			azureError(w, http.StatusBadRequest, "InvalidUri", "The requested URI does not name account "+a.Account+".")
			return
		}
		path = rest
	}
	op, err := a.spec.Match(r, path)
	if err != nil {
		a.mu.Lock()
		a.violations = append(a.violations, fmt.Sprintf("%s %s: %v", r.Method, r.URL.RequestURI(), err))
		a.mu.Unlock()
		azureError(w, http.StatusBadRequest, "InvalidInput", "The request is not one of the Blob service API: "+err.Error())
		return
	}
	if status, code, msg := a.authorize(r, op, path); status != 0 {
		a.Refused.Add(1)
		azureError(w, status, code, msg)
		return
	}
	a.serve(w, r, op, path)
}

func azureError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, xmlEscape(msg))
}

func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// authorize checks a request's Shared Key signature or shared access
// signature, as the service does, and returns the refusal.
func (a *Azure) authorize(r *http.Request, op, path string) (int, string, string) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		cred, ok := strings.CutPrefix(auth, "SharedKey ")
		account, sig, _ := strings.Cut(cred, ":")
		if !ok || account != a.Account {
			return http.StatusForbidden, "AuthenticationFailed", "Server failed to authenticate the request: the Authorization header names another account or scheme."
		}
		if !hmac.Equal([]byte(sig), []byte(a.sign(a.sharedKeyString(r)))) {
			return http.StatusForbidden, "AuthenticationFailed", "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature."
		}
		return 0, "", ""
	}
	q := r.URL.Query()
	if q.Get("sig") == "" {
		// A private container answers an anonymous request as Azure
		// does: as if nothing were there.
		return http.StatusNotFound, "ResourceNotFound", "The specified resource does not exist."
	}
	return a.checkSAS(q, r.Method, op, path)
}

func (a *Azure) sign(s string) string {
	h := hmac.New(sha256.New, a.key)
	h.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// sharedKeyString is the Blob service's string to sign for Shared Key
// (version 2015-02-21 and later: an empty Content-Length for none).
func (a *Azure) sharedKeyString(r *http.Request) string {
	h := r.Header
	length := h.Get("Content-Length")
	if length == "0" {
		length = ""
	}
	var ms []string
	for k := range h {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-") {
			ms = append(ms, lk+":"+strings.TrimSpace(strings.Join(h.Values(k), ",")))
		}
	}
	sort.Strings(ms)
	resource := "/" + a.Account + r.URL.EscapedPath()
	q := r.URL.Query()
	var names []string
	for k := range q {
		names = append(names, strings.ToLower(k))
	}
	sort.Strings(names)
	for _, k := range names {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		resource += "\n" + k + ":" + strings.Join(vs, ",")
	}
	return strings.Join([]string{r.Method, h.Get("Content-Encoding"), h.Get("Content-Language"), length, h.Get("Content-MD5"),
		h.Get("Content-Type"), h.Get("Date"), h.Get("If-Modified-Since"), h.Get("If-Match"), h.Get("If-None-Match"),
		h.Get("If-Unmodified-Since"), h.Get("Range")}, "\n") + "\n" + strings.Join(append(ms, resource), "\n")
}

// SAS returns a container-level service SAS token (the query string,
// without "?") for container with permissions perms (like "rl" or
// "racwdl"), valid until expiry.
func (a *Azure) SAS(container, perms string, expiry time.Time) string {
	q := url.Values{"sv": {"2020-10-02"}, "sr": {"c"}, "sp": {perms}, "se": {expiry.UTC().Format(time.RFC3339)}, "spr": {"https,http"}}
	q.Set("sig", a.sign(sasString(q, a.Account, container)))
	return q.Encode()
}

// sasString is a service SAS's string to sign (versions 2018-11-09 to
// 2020-10-02).
func sasString(q url.Values, account, container string) string {
	return strings.Join([]string{q.Get("sp"), q.Get("st"), q.Get("se"), "/blob/" + account + "/" + container,
		q.Get("si"), q.Get("sip"), q.Get("spr"), q.Get("sv"), q.Get("sr"), q.Get("sst"),
		q.Get("rscc"), q.Get("rscd"), q.Get("rsce"), q.Get("rscl"), q.Get("rsct")}, "\n")
}

// sasNeeds is the permission each operation rclone uses needs.
var sasNeeds = map[string]string{
	"Container_ListBlobHierarchySegment": "l", "Container_ListBlobFlatSegment": "l", "Container_GetProperties": "r",
	"Blob_Download": "r", "Blob_GetProperties": "r", "BlockBlob_StageBlock": "w", "BlockBlob_CommitBlockList": "w",
	"BlockBlob_Upload": "w", "Blob_Delete": "d", "Blob_SetMetadata": "w", "Container_Create": "c",
}

func (a *Azure) checkSAS(q url.Values, method, op, path string) (int, string, string) {
	container, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if q.Get("sv") != "2020-10-02" || q.Get("sr") != "c" {
		return http.StatusForbidden, "AuthenticationFailed", "Only container SAS of version 2020-10-02 are checked here."
	}
	if !hmac.Equal([]byte(q.Get("sig")), []byte(a.sign(sasString(q, a.Account, container)))) {
		return http.StatusForbidden, "AuthenticationFailed", "Signature did not match. String to sign used was " + strings.ReplaceAll(sasString(q, a.Account, container), "\n", `\n`)
	}
	if se, err := time.Parse(time.RFC3339, q.Get("se")); err != nil || time.Now().After(se) {
		return http.StatusForbidden, "AuthenticationFailed", "Signed expiry time must be after signed start time and in the future."
	}
	need, ok := sasNeeds[op]
	if !ok || !strings.Contains(q.Get("sp"), need) {
		return http.StatusForbidden, "AuthorizationPermissionMismatch", "This request is not authorized to perform this operation using this permission."
	}
	return 0, "", ""
}
