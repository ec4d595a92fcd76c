package runloopfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func (s *Server) call(t *testing.T, method, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.APIKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return v
}

func TestUndeclaredRequestFieldIsAViolation(t *testing.T) {
	s := New(t)
	s.call(t, http.MethodPost, "/v1/devboxes", `{"blueprint_name":"x","no_such_field":1}`)
	v := s.Violations()
	if len(v) != 1 || !strings.Contains(v[0], "no_such_field") {
		t.Fatalf("violations = %q", v)
	}
}

// TestUndeclaredResponseFieldIsAViolation: an answer of the fake holding
// a field the document does not declare is reported, so the fake cannot
// drift from Runloop's API unnoticed.
func TestUndeclaredResponseFieldIsAViolation(t *testing.T) {
	s := New(t)
	d := s.call(t, http.MethodPost, "/v1/devboxes", `{"name":"x"}`)
	id, _ := d["id"].(string)
	s.call(t, http.MethodGet, "/v1/devboxes/"+id, "")
	if v := s.Violations(); len(v) != 0 || id == "" {
		t.Fatalf("before the injection: devbox %q, violations %q", id, v)
	}
	s.InjectResponseField("getDevbox", "no_such_field", 1)
	if got := s.call(t, http.MethodGet, "/v1/devboxes/"+id, ""); got["no_such_field"] != float64(1) {
		t.Fatalf("the answer lacks the injected field: %v", got)
	}
	v := s.Violations()
	if len(v) != 1 || !strings.Contains(v[0], "response to GET /v1/devboxes/"+id) || !strings.Contains(v[0], "no_such_field") {
		t.Fatalf("violations = %q; want one naming the response and no_such_field", v)
	}
	s.call(t, http.MethodGet, "/v1/devboxes/"+id, "")
	if v := s.Violations(); len(v) != 0 {
		t.Fatalf("the injection outlived one answer: %q", v)
	}
}

// TestTunnelReachesOnlyAnOpenTunnel: the client reaches port P of a
// devbox only through the host of its open tunnel, and only while it
// runs.
func TestTunnelReachesOnlyAnOpenTunnel(t *testing.T) {
	s := New(t)
	d := s.call(t, http.MethodPost, "/v1/devboxes", `{"name":"x"}`)
	id, _ := d["id"].(string)
	host := "8080-tk-" + id + "." + TunnelDomain
	if _, err := s.tunnelPort(host); err == nil || !strings.Contains(err.Error(), "no devbox has an open tunnel") {
		t.Fatalf("before enable_tunnel: %v", err)
	}
	s.call(t, http.MethodPost, "/v1/devboxes/"+id+"/enable_tunnel", `{"auth_mode":"open"}`)
	if port, err := s.tunnelPort(host); err != nil || port != 8080 {
		t.Fatalf("the open tunnel's host = %d, %v; want port 8080", port, err)
	}
	for _, bad := range []string{"tk-" + id + "." + TunnelDomain, "8080-tk-" + id + ".example.com", "70000-tk-" + id + "." + TunnelDomain} {
		if _, err := s.tunnelPort(bad); err == nil {
			t.Errorf("%s, not a tunnel host, reached a port", bad)
		}
	}
	s.call(t, http.MethodPost, "/v1/devboxes/"+id+"/suspend", "")
	if _, err := s.tunnelPort(host); err == nil || !strings.Contains(err.Error(), "suspended") {
		t.Fatalf("the tunnel of a suspended devbox: %v", err)
	}
}
