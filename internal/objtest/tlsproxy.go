package objtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Impersonation serves a handler as https hosts of the internet (like
// api.box.com) for a client that reaches them through an HTTP proxy:
// the proxy (HTTPS_PROXY) answers CONNECT for those hosts and speaks TLS
// with a certificate of a test authority (SSL_CERT_FILE). A client with
// no endpoint setting, like rclone's box backend, so reaches a test
// server unchanged; the network edge is the only thing replaced.
type Impersonation struct {
	// Env is HTTPS_PROXY and SSL_CERT_FILE, for the client's environment.
	Env []string
	// Hosts are the names served.
	Hosts []string
}

// Impersonate serves h as hosts (port 443) until the test ends.
func Impersonate(t testing.TB, h http.Handler, hosts ...string) *Impersonation {
	t.Helper()
	cert, caPEM, err := testCertificate(hosts)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	ln := &connListener{conns: make(chan net.Conn), done: make(chan struct{})}
	inner := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go inner.Serve(ln)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, port, _ := net.SplitHostPort(r.Host)
		if r.Method != http.MethodConnect || port != "443" || !slices.Contains(hosts, host) {
			http.Error(w, "this proxy reaches only "+strings.Join(hosts, ", "), http.StatusForbidden)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		ln.offer(tls.Server(conn, cfg))
	}))
	t.Cleanup(func() {
		proxy.Close()
		inner.Close()
	})
	return &Impersonation{Env: []string{"HTTPS_PROXY=" + proxy.URL, "https_proxy=" + proxy.URL, "SSL_CERT_FILE=" + ca}, Hosts: hosts}
}

// connListener hands the proxy's TLS connections to an http.Server.
type connListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *connListener) offer(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errors.New("listener closed")
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// testCertificate makes a certificate authority and a certificate it
// signed for hosts; it returns the certificate and the authority's PEM.
func testCertificate(hosts []string) (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "objtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caPEM, nil
}
