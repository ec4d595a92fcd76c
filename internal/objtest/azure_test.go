package objtest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAzureSpecRefuses: requests the Blob service specification does
// not describe are refused and recorded, so a client that drifts from
// the API fails the tests that use this service.
func TestAzureSpecRefuses(t *testing.T) {
	a, err := NewAzure("acct", "a2V5LW9mLXRoZS10ZXN0")
	if err != nil {
		t.Fatal(err)
	}
	a.CreateContainer("room")
	sas := a.SAS("room", "rl", time.Now().Add(time.Hour))
	cases := []struct {
		name, method, target string
		header               map[string]string
		want                 string
	}{
		{"listing", "GET", "/acct/room?restype=container&comp=list&delimiter=%2F&" + sas, map[string]string{"x-ms-version": "2020-10-02"}, ""},
		{"wrong version", "GET", "/acct/room?restype=container&comp=list&delimiter=%2F&" + sas, map[string]string{"x-ms-version": "2015-02-21"}, "not one of [2020-10-02]"},
		{"unknown query parameter", "GET", "/acct/room?restype=container&comp=list&delimiter=%2F&color=blue&" + sas, map[string]string{"x-ms-version": "2020-10-02"}, `"color" is not a parameter`},
		{"unknown operation", "PATCH", "/acct/room/a.txt?" + sas, map[string]string{"x-ms-version": "2020-10-02"}, "no operation"},
		{"bad integer", "GET", "/acct/room?restype=container&comp=list&delimiter=%2F&maxresults=many&" + sas, map[string]string{"x-ms-version": "2020-10-02"}, "not an integer"},
		{"undeclared header", "GET", "/acct/room/a.txt?" + sas, map[string]string{"x-ms-version": "2020-10-02", "x-ms-colour": "red"}, "x-ms-colour"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(a.Violations())
			r := httptest.NewRequest(tc.method, "http://127.0.0.1"+tc.target, nil)
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			a.ServeHTTP(w, r)
			if tc.want == "" {
				if w.Code != http.StatusOK || len(a.Violations()) != before {
					t.Fatalf("a valid request got %d %s (violations %v)", w.Code, w.Body, a.Violations())
				}
				return
			}
			v := a.Violations()
			if w.Code != http.StatusBadRequest || len(v) != before+1 || !strings.Contains(v[len(v)-1], tc.want) {
				t.Fatalf("got %d %s, violations %v; want a refusal saying %q", w.Code, w.Body, v, tc.want)
			}
		})
	}
}

// TestAzureSharedKey: a request signed with the account key passes; one
// signed with another key, or for another account, is refused.
func TestAzureSharedKey(t *testing.T) {
	a, err := NewAzure("acct", "a2V5LW9mLXRoZS10ZXN0")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewAzure("acct", "b3RoZXIta2V5")
	a.CreateContainer("room")
	a.Put("room", "a.txt", "alpha")
	req := func(signer *Azure) *http.Request {
		r := httptest.NewRequest("GET", "http://127.0.0.1/acct/room/a.txt?timeout=30", nil)
		r.Header.Set("x-ms-version", "2020-10-02")
		r.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
		r.Header.Set("Authorization", "SharedKey acct:"+signer.sign(signer.sharedKeyString(r)))
		return r
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, req(a))
	if w.Code != http.StatusOK || w.Body.String() != "alpha" {
		t.Fatalf("signed with the key: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	a.ServeHTTP(w, req(other))
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "AuthenticationFailed") || a.Refused.Load() != 1 {
		t.Fatalf("signed with another key: %d %s", w.Code, w.Body)
	}
}
