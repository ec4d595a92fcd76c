package runloopfake

import (
	"net/http"
	"strings"
	"testing"
)

func TestUndeclaredRequestFieldIsAViolation(t *testing.T) {
	s := New(t)
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/devboxes", strings.NewReader(`{"blueprint_name":"x","no_such_field":1}`))
	req.Header.Set("Authorization", "Bearer "+s.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	v := s.Violations()
	if len(v) != 1 || !strings.Contains(v[0], "no_such_field") {
		t.Fatalf("violations = %q", v)
	}
}
