package cassette

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func post(t *testing.T, ctx context.Context, rt http.RoundTripper, url, body string) (string, int) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-secret-key")
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// A recorder adds to the cassette it finds, so a recording resumed by a
// later apply is complete; each exchange is served once; a request asked
// once too often is a miss saying so.
func TestRecordAppendsAndReplayServesEachOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("OpenAI-Organization", "org-secret")
		_, _ = io.WriteString(w, `{"echo":`+string(b)+`}`)
	}))
	defer srv.Close()
	file := File(t.TempDir(), "provider.openai")
	opts := Options{Scrub: func(s string) string { return strings.ReplaceAll(s, "hunter2", "(sensitive)") }}
	for _, body := range []string{`"one hunter2"`, `"two"`} {
		r, err := NewRecorder(file, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := post(t, context.Background(), r.Transport(nil), srv.URL+"/v1/x?key=k", body); got != `{"echo":`+body+`}` {
			t.Fatalf("recording changed the live response: %s", got)
		}
		if r.Recorded() != 1 || r.Err() != nil {
			t.Fatalf("recorded %d, err %v", r.Recorded(), r.Err())
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"sk-secret-key", "Bearer", "org-secret", "key=k", "hunter2"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("the cassette holds %q:\n%s", leak, b)
		}
	}
	srv.Close()

	p, err := Load(file, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, missed := WithMissSlot(context.Background())
	if got, code := post(t, ctx, p, "http://elsewhere/v1/x", `"two"`); code != 200 || got != `{"echo":"two"}` {
		t.Fatalf("replay: %d %s", code, got)
	}
	if got, _ := post(t, ctx, p, "http://elsewhere/v1/x", `"one hunter2"`); got != `{"echo":"one (sensitive)"}` {
		t.Fatalf("replay of the scrubbed request: %s", got)
	}
	if missed() != nil {
		t.Fatalf("unexpected miss: %v", missed())
	}
	_, code := post(t, ctx, p, "http://elsewhere/v1/x", `"two"`)
	var miss *MissError
	if code != http.StatusBadRequest || !errors.As(missed(), &miss) || miss.N != 3 || !strings.Contains(miss.Error(), "all 2 recorded exchanges were already served") {
		t.Fatalf("third request: %d %v", code, missed())
	}
	if _, err := Load(filepath.Join(filepath.Dir(file), "provider.other.yaml"), opts); err == nil || !strings.Contains(err.Error(), "agentctl apply -record") {
		t.Fatalf("missing cassette: %v", err)
	}
}
