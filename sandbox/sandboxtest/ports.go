package sandboxtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// testPorts: a server listening on an exposed port in the sandbox
// answers at the URL PortURL returns; ports out of range are refused
// with an error naming them. A provider lacking ports refuses them at
// validation and at Create.
func (s *suite) testPorts(t *testing.T) {
	port := freePort(t)
	want := sandbox.Spec{Ports: []int{port}}
	if why, lacks := sandbox.Lacks(s.f.Provider, sandbox.CapabilityPorts); lacks {
		s.checkRefused(t, sandbox.CapabilityPorts, why, want, suiteRanges.Ports, "port")
		return
	}
	sb, _ := s.create(t, want)
	c := ctx(t)
	body := "hello from the sandbox " + randHex(4)
	if err := sb.WriteFile(c, "www/index.html", []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	serve(t, sb, port)
	u, err := sb.PortURL(c, port)
	if err != nil {
		t.Fatalf("PortURL of the exposed port %d: %v", port, err)
	}
	if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		t.Fatalf("PortURL of port %d returned %q, not an http(s) URL with a host", port, u)
	}
	for _, bad := range []int{0, 70000} {
		if _, err := sb.PortURL(c, bad); err == nil || !strings.Contains(err.Error(), strconv.Itoa(bad)) {
			t.Errorf("PortURL of port %d, out of range, = %s; want an error naming the port", bad, describe(err))
		}
	}
	if s.f.PortsUnreachable != "" {
		t.Logf("not fetching %s: %s", u, s.f.PortsUnreachable)
		return
	}
	if got := httpGet(t, s.f.HTTPClient, u+"/index.html"); got != body {
		t.Errorf("GET %s/index.html from the host = %q, want what the server in the sandbox serves (%q)", u, got, body)
	}
}

// freePort returns a TCP port from 3000 to 9999 (the range every
// provider can expose) that nothing listens on on this machine.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := 3000 + rand.IntN(7000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free TCP port from 3000 to 9999 on this machine")
	return 0
}

// serve starts an HTTP server of the workspace's www directory on port
// in the sandbox (busybox httpd, or Python's), until t ends: as an
// attached process, or, in a sandbox without them (a provider lacking
// sandbox.CapabilityProcesses), in the background of a command.
func serve(t *testing.T, sb sandbox.Sandbox, port int) {
	t.Helper()
	p := strconv.Itoa(port)
	script := "cd www && if command -v httpd >/dev/null 2>&1; then exec httpd -f -p " + p +
		"; elif command -v busybox >/dev/null 2>&1; then exec busybox httpd -f -p " + p +
		"; else exec python3 -m http.server " + p + "; fi"
	ps, ok := sb.(sandbox.ProcessStarter)
	if !ok {
		serveDetached(t, sb, script)
		return
	}
	proc, err := ps.StartProcess(ctx(t), sandbox.ProcessRequest{Shell: script})
	if err != nil {
		t.Fatalf("starting an HTTP server in the sandbox: %v", err)
	}
	go io.Copy(io.Discard, proc.Stdout())
	go io.Copy(io.Discard, proc.Stderr())
	t.Cleanup(func() { proc.Kill() })
}

// serveDetached runs script in the background of a command, its output
// discarded and its process id in www.pid, and kills it when t ends.
func serveDetached(t *testing.T, sb sandbox.Sandbox, script string) {
	t.Helper()
	sh(t, sb, "starting an HTTP server in the background", "nohup sh -c "+sandbox.ShellQuote(script)+" </dev/null >/dev/null 2>&1 & echo $! > www.pid")
	t.Cleanup(func() {
		_, _ = sb.Exec(context.Background(), sandbox.ExecRequest{Shell: `kill "$(cat www.pid)"`, Timeout: time.Minute})
	})
}

// httpGet fetches u with hc (nil: a plain client), retrying while the
// server starts.
func httpGet(t *testing.T, hc *http.Client, u string) string {
	t.Helper()
	if hc == nil {
		hc = &http.Client{}
	}
	hc = &http.Client{Transport: hc.Transport, Timeout: 5 * time.Second}
	var last error
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(u)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && rerr == nil {
				return string(b)
			}
			err = fmt.Errorf("%s: %q", resp.Status, b)
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("GET %s from the host never succeeded: %v", u, last)
	return ""
}
