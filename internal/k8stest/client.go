package k8stest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A client talks to the API server of a kubeconfig with its client
// certificate: enough for the checks of this package without a
// Kubernetes client library.
type client struct {
	Server string
	HTTP   *http.Client
}

// newClient reads the kubeconfig at path: the server, the CA and the
// client certificate and key of its first cluster and user, given as
// *-data (base64) or as file paths. It reads the plain layout that
// cluster.sh writes, not every form YAML allows.
func newClient(path string) (*client, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "- "))
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.Trim(strings.TrimSpace(value), `"'`)
		if _, seen := fields[key]; !seen && value != "" {
			fields[key] = value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	get := func(name string) ([]byte, error) {
		if v, ok := fields[name+"-data"]; ok {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %s-data: %w", path, name, err)
			}
			return b, nil
		}
		if v, ok := fields[name]; ok {
			if !filepath.IsAbs(v) {
				v = filepath.Join(filepath.Dir(path), v)
			}
			return os.ReadFile(v)
		}
		return nil, fmt.Errorf("%s: no %s or %s-data", path, name, name)
	}
	server := fields["server"]
	if !strings.HasPrefix(server, "https://") {
		return nil, fmt.Errorf("%s: server %q is not https://", path, server)
	}
	caPEM, err := get("certificate-authority")
	if err != nil {
		return nil, err
	}
	certPEM, err := get("client-certificate")
	if err != nil {
		return nil, err
	}
	keyPEM, err := get("client-key")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s: no PEM certificate in the certificate authority", path)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: client certificate: %w", path, err)
	}
	return &client{
		Server: strings.TrimSuffix(server, "/"),
		HTTP: &http.Client{
			Timeout: 10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs:      pool,
				Certificates: []tls.Certificate{pair},
				MinVersion:   tls.VersionTLS12,
			}},
		},
	}, nil
}

// statusError is a response other than 200 OK.
type statusError struct {
	Path string
	Code int
	Body string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("GET %s: %d %s", e.Path, e.Code, e.Body)
}

// get returns the body of GET path (such as /api/v1/nodes), or a
// *statusError when the answer is not 200 OK.
func (c *client) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{Path: path, Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	return body, nil
}

// readyz asks the API server of the kubeconfig at path whether it is
// ready.
func readyz(path string) error {
	c, err := newClient(path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := c.get(ctx, "/readyz")
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(string(body)); got != "ok" {
		return errors.New("GET /readyz: " + got)
	}
	return nil
}
