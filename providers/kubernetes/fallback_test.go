package kubernetes

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentctl/agentctl/sandbox"
)

// upgradeProxy stands between the provider and the test cluster's API
// server: it forwards every request with the admin's credentials and
// counts the stream upgrades it sees by protocol, refusing WebSocket ones
// when refuse is set, as an API server or a proxy without WebSocket
// support does.
type upgradeProxy struct {
	refuse bool
	mu     sync.Mutex
	seen   map[string]int // "websocket", "spdy" (upgrades asked for)
}

func (u *upgradeProxy) count(proto string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[proto]
}

// start serves the proxy and returns a kubeconfig that reaches the
// cluster through it.
func (u *upgradeProxy) start(t *testing.T, kubeconfig, ns string) string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg = tlsCfg.Clone()
	tlsCfg.NextProtos = []string{"http/1.1"} // upgrades need HTTP/1.1
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: false, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	u.seen = map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if up := strings.ToLower(r.Header.Get("Upgrade")); up != "" {
			proto := "spdy"
			if up == "websocket" {
				proto = "websocket"
			}
			u.mu.Lock()
			u.seen[proto]++
			u.mu.Unlock()
			if proto == "websocket" && u.refuse {
				http.Error(w, "this proxy does not pass WebSocket upgrades", http.StatusBadRequest)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster: {server: "`+srv.URL+`"}
users:
- name: proxy
  user: {}
contexts:
- name: proxy
  context: {cluster: proxy, user: proxy, namespace: `+ns+`}
current-context: proxy
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestExecFallsBackToSPDYOnlyOnUpgradeFailure: through a proxy that
// refuses WebSocket upgrades, exec falls back to SPDY and works (exit
// codes, stderr, stdin); through one that passes them, a command that
// exits non-zero is one WebSocket exec and no SPDY attempt.
func TestExecFallsBackToSPDYOnlyOnUpgradeFailure(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	ctx := context.Background()
	for _, refuse := range []bool{true, false} {
		u := &upgradeProxy{refuse: refuse}
		p, err := New(ctx, Options{ConfigPath: u.start(t, c.kubeconfig, c.ns), CreateTimeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		spec := testSpec(t)
		spec.Address = `sandbox.fallback["` + map[bool]string{true: "refused", false: "passed"}[refuse] + `"]`
		sb, err := p.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sb.Delete(context.Background()) })
		ws, spdy := u.count("websocket"), u.count("spdy")
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "read l; echo out $l; echo err >&2; exit 3", Stdin: strings.NewReader("in\n")})
		if err != nil || res.ExitCode != 3 || string(res.Stdout) != "out in\n" || string(res.Stderr) != "err\n" {
			t.Fatalf("refuse=%v: exec: %+v %v", refuse, res, err)
		}
		dws, dspdy := u.count("websocket")-ws, u.count("spdy")-spdy
		switch {
		case refuse && (dws < 1 || dspdy < 1):
			t.Fatalf("WebSocket refused: %d WebSocket and %d SPDY upgrades; want a WebSocket attempt, then SPDY", dws, dspdy)
		case !refuse && (dws < 1 || dspdy != 0):
			t.Fatalf("WebSocket passed: %d WebSocket and %d SPDY upgrades for a command exiting 3; want no SPDY attempt", dws, dspdy)
		}
	}
}
