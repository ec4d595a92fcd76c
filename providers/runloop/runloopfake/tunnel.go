package runloopfake

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// TunnelDomain is where Runloop serves a devbox's open tunnel: port P of
// the devbox at https://P-<tunnel key>.TunnelDomain.
const TunnelDomain = "tunnel.runloop.ai"

// Client returns an HTTP client that reaches tunnel URLs as Runloop
// serves them: a request to https://P-<key>.tunnel.runloop.ai goes to
// port P of the devbox whose open tunnel has that key, which is port P
// of this machine (the fake's devboxes share its network). A host of no
// tunnel, or of a devbox not running, is an error, as an unknown host is.
func (s *Server) Client() *http.Client {
	return &http.Client{Transport: &tunnelTransport{s: s, base: &http.Transport{}}}
}

type tunnelTransport struct {
	s    *Server
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (tt *tunnelTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	port, err := tt.s.tunnelPort(r.URL.Hostname())
	if err != nil {
		return nil, err
	}
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = "http", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return tt.base.RoundTrip(out)
}

// tunnelPort returns the port a tunnel host names, when it is the host of
// a running devbox's open tunnel.
func (s *Server) tunnelPort(host string) (int, error) {
	label, ok := strings.CutSuffix(host, "."+TunnelDomain)
	p, key, _ := strings.Cut(label, "-")
	port, err := strconv.Atoi(p)
	if !ok || err != nil || port < 1 || port > 65535 || key == "" {
		return 0, fmt.Errorf("runloopfake: %s is not a tunnel host (PORT-KEY.%s)", host, TunnelDomain)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devboxes {
		if t, _ := d.view["tunnel"].(map[string]any); t != nil && t["tunnel_key"] == key {
			if st := d.view["status"]; st != "running" {
				return 0, fmt.Errorf("runloopfake: the tunnel %s leads to devbox %s, which is %s", key, d.view["id"], st)
			}
			return port, nil
		}
	}
	return 0, fmt.Errorf("runloopfake: no devbox has an open tunnel with key %q (host %s)", key, host)
}
