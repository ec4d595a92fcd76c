package objtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// GCS is a running GCS server: fake-gcs-server's JSON API behind an
// OAuth 2.0 token endpoint for one service account. Requests without a
// token that endpoint issued are refused (401), and it issues tokens only
// for a JWT assertion signed with the service account's key.
type GCS struct {
	URL string
	// Endpoint is the JSON API's base URL, for rclone's gcs endpoint.
	Endpoint string
	// CredentialsJSON is the service account key file (its token_uri is
	// this server's token endpoint).
	CredentialsJSON string
	srv             *fakestorage.Server
	key             *rsa.PrivateKey
	email           string
	mu              sync.Mutex
	tokens          map[string]bool
	// Refused counts the requests refused for their credentials.
	Refused atomic.Int64
}

// StartGCS starts a GCS server on 127.0.0.1; it stops when the test ends.
func StartGCS(t testing.TB) *GCS {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	g := &GCS{key: key, email: "mounts@objtest.iam.gserviceaccount.com", tokens: map[string]bool{}}
	// inner is set once the fake store exists, which needs the server's
	// URL; ready orders that write before every request's read.
	var inner http.Handler
	ready := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-ready
		if r.URL.Path == "/token" {
			g.token(w, r)
			return
		}
		if !g.authorized(r) {
			g.Refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":401,"message":"Invalid Credentials","errors":[{"reason":"authError"}]}}`)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, ExternalURL: hs.URL, PublicHost: strings.TrimPrefix(hs.URL, "http://"), Scheme: "http"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	inner = srv.HTTPHandler()
	close(ready)
	g.srv, g.URL, g.Endpoint = srv, hs.URL, hs.URL+"/storage/v1/"
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "objtest", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": g.email, "client_id": "1", "token_uri": hs.URL + "/token",
	})
	g.CredentialsJSON = string(sa)
	return g
}

// CreateBucket makes an empty bucket.
func (g *GCS) CreateBucket(name string) {
	g.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
}

// Put stores an object.
func (g *GCS) Put(bucket, name, content string) {
	g.srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucket, Name: name}, Content: []byte(content)})
}

// Get returns an object's content and whether it exists.
func (g *GCS) Get(bucket, name string) (string, bool) {
	obj, err := g.srv.GetObject(bucket, name)
	if err != nil {
		return "", false
	}
	return string(obj.Content), true
}

func (g *GCS) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	g.mu.Lock()
	defer g.mu.Unlock()
	return ok && g.tokens[tok]
}

// token is the OAuth 2.0 token endpoint of the JWT bearer grant (RFC
// 7523) service accounts use: the assertion must be an RS256 JWT the
// service account's key signed, issued by its email for this endpoint.
func (g *GCS) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	if err := g.checkAssertion(r.Form.Get("assertion"), "http://"+r.Host+"/token"); err != nil {
		g.Refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"invalid_grant","error_description":%q}`, err.Error())
		return
	}
	buf := make([]byte, 16)
	rand.Read(buf)
	tok := "ya29.objtest-" + hex.EncodeToString(buf)
	g.mu.Lock()
	g.tokens[tok] = true
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, tok)
}

func (g *GCS) checkAssertion(jwt, aud string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return fmt.Errorf("the assertion is not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("the assertion's signature is malformed")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&g.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("the assertion is not signed with the service account's key")
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return fmt.Errorf("the assertion's claims are malformed")
	}
	var claims struct {
		Iss string `json:"iss"`
		Aud string `json:"aud"`
	}
	if err := json.Unmarshal(body, &claims); err != nil || claims.Iss != g.email || claims.Aud != aud {
		return fmt.Errorf("the assertion names issuer %q and audience %q, not %q and %q", claims.Iss, claims.Aud, g.email, aud)
	}
	return nil
}
