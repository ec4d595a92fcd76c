package objtest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBoxSpecRefuses: requests Box's OpenAPI document does not describe
// are refused and recorded; a valid one without the token is refused
// with 401.
func TestBoxSpecRefuses(t *testing.T) {
	if _, err := boxRouterOnce(); err != nil {
		t.Fatal(err)
	}
	b := &Box{Token: "tok", items: map[string]*boxItem{"0": {id: "0", typ: "folder"}}}
	cases := []struct {
		name, method, host, target, token string
		status                            int
		want                              string
	}{
		{"listing", "GET", "api.box.com", "/2.0/folders/0/items?fields=name&limit=1000&usemarker=true", "tok", http.StatusOK, ""},
		{"no token", "GET", "api.box.com", "/2.0/folders/0/items?limit=1000", "", http.StatusUnauthorized, ""},
		{"bad limit", "GET", "api.box.com", "/2.0/folders/0/items?limit=lots", "tok", http.StatusBadRequest, "limit"},
		{"no such operation", "GET", "api.box.com", "/2.0/folders/0/colours", "tok", http.StatusBadRequest, "no operation"},
		{"outside the API", "GET", "api.box.com", "/3.0/folders/0/items", "tok", http.StatusBadRequest, "not below"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(b.Violations())
			r := httptest.NewRequest(tc.method, "https://"+tc.host+tc.target, nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			b.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("got %d %s, want %d", w.Code, w.Body, tc.status)
			}
			v := b.Violations()
			if tc.want == "" {
				if len(v) != before {
					t.Fatalf("a valid request was recorded as a violation: %v", v)
				}
				return
			}
			if len(v) != before+1 || !strings.Contains(v[len(v)-1], tc.want) {
				t.Fatalf("violations %v, want one saying %q", v, tc.want)
			}
		})
	}
}
