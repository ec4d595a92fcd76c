// Package objtest runs object stores for tests on the loopback interface:
// an S3 server (gofakes3's in-memory backend behind a verifier of AWS
// Signature Version 4 that requires one access key and its secret) and
// a GCS server (see gcs.go). Tests that mount buckets use them as real
// peers: rclone speaks to them over HTTP as it would to the cloud.
package objtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/agentctl/agentctl/internal/testenv"
)

// S3 is a running S3 server.
type S3 struct {
	URL             string
	AccessKeyID     string
	SecretAccessKey string
	Region          string
	backend         *s3mem.Backend
	handler         http.Handler
	// Refused counts the requests refused for their credentials.
	Refused atomic.Int64
}

// NewS3 returns an S3 server that accepts only requests signed (SigV4)
// with the given key; serve its Handler.
func NewS3(accessKeyID, secretAccessKey string) *S3 {
	s := &S3{AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey, Region: "us-east-1"}
	s.backend = s3mem.New()
	s.handler = s.verify(gofakes3.New(s.backend, gofakes3.WithoutVersioning()).Server())
	return s
}

// Handler serves the S3 API.
func (s *S3) Handler() http.Handler { return s.handler }

// StartS3 starts an S3 server on 127.0.0.1 that accepts only requests
// signed (SigV4) with the returned key; it stops when the test ends.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	s := NewS3("AKIAOBJTEST000000001", "objtest-secret-"+randomHex(8))
	srv := httptest.NewServer(s.handler)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// CreateBucket makes an empty bucket.
func (s *S3) CreateBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.MakeBucket(name); err != nil {
		t.Fatal(err)
	}
}

// MakeBucket makes an empty bucket.
func (s *S3) MakeBucket(name string) error {
	if err := s.backend.CreateBucket(name); err != nil {
		return fmt.Errorf("creating bucket %s: %w", name, err)
	}
	return nil
}

// Put stores an object.
func (s *S3) Put(t testing.TB, bucket, key, content string) {
	t.Helper()
	if err := s.PutObject(bucket, key, content); err != nil {
		t.Fatal(err)
	}
}

// PutObject stores an object.
func (s *S3) PutObject(bucket, key, content string) error {
	if _, err := s.backend.PutObject(bucket, key, map[string]string{}, strings.NewReader(content), int64(len(content)), nil); err != nil {
		return fmt.Errorf("putting %s/%s: %w", bucket, key, err)
	}
	return nil
}

// Get returns an object's content and whether it exists.
func (s *S3) Get(bucket, key string) (string, bool) {
	obj, err := s.backend.GetObject(bucket, key, nil)
	if err != nil {
		return "", false
	}
	defer obj.Contents.Close()
	b, err := io.ReadAll(obj.Contents)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// verify refuses every request not signed with the server's key: a
// missing signature, an unknown key id and a wrong secret each get the
// error AWS returns for them.
func (s *S3) verify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, msg := s.check(r)
		if code != "" {
			s.Refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// check verifies r's Authorization header (AWS Signature Version 4, the
// header form) and returns an S3 error code and message when it fails.
func (s *S3) check(r *http.Request) (code, msg string) {
	auth := r.Header.Get("Authorization")
	const alg = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, alg) {
		return "AccessDenied", "Anonymous access is forbidden: sign the request (AWS Signature Version 4)."
	}
	parts := map[string]string{}
	for _, p := range strings.Split(strings.TrimPrefix(auth, alg), ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok {
			parts[k] = v
		}
	}
	cred := strings.Split(parts["Credential"], "/")
	if len(cred) != 5 || cred[4] != "aws4_request" {
		return "AuthorizationHeaderMalformed", "The Credential is malformed."
	}
	if cred[0] != s.AccessKeyID {
		return "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
	}
	amzDate := r.Header.Get("X-Amz-Date")
	if len(amzDate) < 8 || amzDate[:8] != cred[1] {
		return "AuthorizationHeaderMalformed", "X-Amz-Date does not match the credential's date."
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return "InvalidRequest", "Missing x-amz-content-sha256."
	}
	if payload != "UNSIGNED-PAYLOAD" && !strings.HasPrefix(payload, "STREAMING-") {
		if err := checkPayload(r, payload); err != nil {
			return "XAmzContentSHA256Mismatch", err.Error()
		}
	}
	signed := strings.Split(parts["SignedHeaders"], ";")
	canonical := strings.Join([]string{
		r.Method, uriEncode(r.URL.Path, false), canonicalQuery(r), canonicalHeaders(r, signed), strings.Join(signed, ";"), payload,
	}, "\n")
	scope := strings.Join(cred[1:], "/")
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+s.SecretAccessKey), cred[1])
	for _, c := range cred[2:] {
		key = hmacSHA256(key, c)
	}
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(parts["Signature"])) {
		return "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method."
	}
	return "", ""
}

// checkPayload verifies a signed payload hash against the body.
func checkPayload(r *http.Request, want string) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != want {
		return fmt.Errorf("the body's SHA-256 is not the x-amz-content-sha256 the request was signed with")
	}
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// uriEncode encodes s as SigV4 does: unreserved characters stay, every
// other byte is %XX; slashes stay in paths.
func uriEncode(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func canonicalQuery(r *http.Request) string {
	q := r.URL.Query()
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

func canonicalHeaders(r *http.Request, signed []string) string {
	var b strings.Builder
	for _, h := range signed {
		var v string
		if h == "host" {
			v = r.Host
		} else {
			v = strings.Join(r.Header.Values(h), ",")
		}
		b.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	return b.String()
}

// NeedMounts skips the test (failing it under AGENTCTL_TEST_STRICT=1)
// unless rclone and FUSE are there and the test runs as root, which
// mounting with --allow-other and binding into sandboxes need.
func NeedMounts(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("rclone"); err != nil {
		testenv.Missing(t, "rclone is not installed (apt-get install rclone fuse3): %v", err)
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		testenv.Missing(t, "FUSE is unavailable: %v", err)
	} else {
		f.Close()
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "mount tests run as root")
	}
}
