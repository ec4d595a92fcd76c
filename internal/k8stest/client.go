package k8stest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// A client talks to the API server of a kubeconfig with its credentials:
// plain GETs are enough for the checks of this package.
type client struct {
	Server string
	HTTP   *http.Client
}

// newClient reads the kubeconfig at path (its current context) with
// client-go's loader and makes an HTTP client with its credentials. The
// server must be https://, as cluster.sh's is.
func newClient(path string) (*client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !strings.HasPrefix(cfg.Host, "https://") {
		return nil, fmt.Errorf("%s: server %q is not https://", path, cfg.Host)
	}
	cfg.Timeout = 10 * time.Second
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &client{Server: strings.TrimSuffix(cfg.Host, "/"), HTTP: hc}, nil
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
