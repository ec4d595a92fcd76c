package e2bfake

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A process other than the test (the agentctl binary) reaches the fake as
// it would reach E2B: through an HTTPS proxy (HTTPS_PROXY, honoured by
// Go's HTTP client) that tunnels every host of Domain to the fake, whose
// certificate names *.Domain and is signed by a certificate authority of
// the fake's own, trusted through SSL_CERT_FILE.

// certificate makes a CA and a certificate for Domain and *.Domain
// signed by it.
func certificate(t testing.TB) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2bfake CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: Domain}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{Domain, "*." + Domain}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca
}

// Environ returns what a child process needs to reach the fake as E2B:
// the proxy, the fake's CA, the domain and the API key.
func (s *Server) Environ() []string {
	return []string{"HTTPS_PROXY=http://" + s.proxy.Addr().String(), "NO_PROXY=", "SSL_CERT_FILE=" + s.caFile,
		"E2B_DOMAIN=" + Domain, "E2B_API_KEY=" + s.APIKey}
}

// startProxy serves CONNECT requests for hosts of Domain, tunnelling them
// to the fake.
func (s *Server) startProxy(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.proxy = ln
	s.caFile = filepath.Join(s.internal, "ca.pem")
	if err := os.WriteFile(s.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.ca.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.tunnel(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
}

func (s *Server) tunnel(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	host, _, _ := net.SplitHostPort(req.Host)
	if req.Method != http.MethodConnect || !strings.HasSuffix(host, "."+Domain) {
		s.violation("proxy: %s %s: only CONNECT to hosts of %s is served", req.Method, req.Host, Domain)
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, br); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}
