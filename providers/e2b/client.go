// Package e2b is the E2B sandbox provider: a client of E2B's control
// plane written against its published OpenAPI document (create from a
// template, connect, pause, kill, list by metadata, timeouts, snapshots),
// a client of envd, the daemon in every sandbox, over Connect RPC (its
// process and filesystem services, with code generated from the vendored
// .proto files in internal/envd) and its HTTP file endpoints, and a
// sandbox.Provider built on both. The documents are vendored under
// testdata/spec with their license; e2bfake is a fake of both that
// validates every exchange against them.
package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/internal/hosted"
)

// DefaultDomain is E2B's public domain: the API is api.<domain>, a
// sandbox's port P is P-<sandboxID>.<domain>.
const DefaultDomain = "e2b.app"

// EnvdPort is the port envd listens on in every sandbox.
const EnvdPort = 49983

// Config configures a Client. APIKey is required. It is only ever put in
// the X-API-Key header.
type Config struct {
	APIKey string
	// Domain defaults to DefaultDomain.
	Domain string
	// APIURL defaults to https://api.<Domain>.
	APIURL string
	// HTTPClient defaults to a client without an overall timeout (long
	// commands and downloads are bounded by contexts instead).
	HTTPClient *http.Client
}

// Client talks to the E2B control plane and to the envd daemons of its
// sandboxes. It is safe for concurrent use.
type Client struct {
	apiURL string
	domain string
	key    string
	http   *http.Client
	// retries is how many times a retryable request is sent.
	retries int
	// sleep waits between retries; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// NewClient checks cfg and returns a client.
func NewClient(cfg Config) (*Client, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("no API key: set E2B_API_KEY in the environment, or api_key = env(\"E2B_API_KEY\") in the provider \"e2b\" block")
	}
	domain := strings.TrimSuffix(strings.TrimSpace(cfg.Domain), ".")
	if domain == "" {
		domain = DefaultDomain
	}
	if strings.ContainsAny(domain, "/:@ ") {
		return nil, fmt.Errorf("domain %q is not a domain name (like %s): drop the scheme, port and path", domain, DefaultDomain)
	}
	api := strings.TrimRight(cfg.APIURL, "/")
	if api == "" {
		api = "https://api." + domain
	}
	u, err := url.Parse(api)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api_url %q is not an http(s) URL; leave it unset to use https://api.%s", api, domain)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{apiURL: api, domain: domain, key: cfg.APIKey, http: hc, retries: 5, sleep: hosted.Sleep}, nil
}

// request describes one control-plane call.
type request struct {
	method string
	path   string // below the API URL
	query  url.Values
	body   []byte // sent as JSON when not nil
	op     string // for messages
	// sandbox names the sandbox in messages (address and id).
	sandbox string
	// idempotent requests are retried on 500, 502 and 504 and on
	// connection errors too; every request is retried on 429 and 503,
	// which E2B answers before doing anything.
	idempotent bool
}

// scrub removes the API key from a server message.
func (c *Client) scrub(s string) string { return hosted.Scrub(s, c.key) }

// do sends r with the retry policy and returns the response with its body
// read (2xx only); other statuses become *APIError.
func (c *Client) do(ctx context.Context, r request) (*http.Response, []byte, error) {
	u := c.apiURL + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	backoff := hosted.FirstBackoff
	for attempt := 1; ; attempt++ {
		resp, body, err := c.send(ctx, r, u)
		if err != nil {
			if ctx.Err() != nil || !r.idempotent || attempt >= c.retries {
				return nil, nil, err
			}
			if serr := c.sleep(ctx, hosted.Jitter(backoff)); serr != nil {
				return nil, nil, err
			}
			backoff = hosted.NextBackoff(backoff)
			continue
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, body, nil
		}
		apiErr := apiError(r.op, r.sandbox, resp.StatusCode, c.scrub(hosted.ServerMessage(body)), attempt)
		wait, retry := hosted.RetryWait(resp.StatusCode, resp.Header, r.idempotent, backoff)
		if !retry || attempt >= c.retries {
			return nil, nil, apiErr
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, nil, fmt.Errorf("%w (%v while waiting to retry)", apiErr, err)
		}
		backoff = hosted.NextBackoff(backoff)
	}
}

// send makes one attempt.
func (c *Client) send(ctx context.Context, r request, u string) (*http.Response, []byte, error) {
	var rd io.Reader
	if r.body != nil {
		rd = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", r.op, err)
	}
	req.Header.Set("X-API-Key", c.key)
	req.Header.Set("User-Agent", userAgent)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%s%s: %w", r.op, inSandbox(r.sandbox), ctx.Err())
		}
		return nil, nil, fmt.Errorf("%s%s: cannot reach the E2B API at %s (%v); check the domain setting (E2B_DOMAIN) and your network", r.op, inSandbox(r.sandbox), c.apiURL, c.scrub(unwrapAll(err).Error()))
	}
	defer resp.Body.Close()
	limit := int64(64 << 20)
	if resp.StatusCode >= 300 {
		limit = 64 << 10
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, nil, fmt.Errorf("%s%s: reading the answer: %w", r.op, inSandbox(r.sandbox), err)
	}
	return resp, body, nil
}

func unwrapAll(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func inSandbox(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// doJSON sends in (when non-nil) as JSON and decodes the answer into out
// (when non-nil).
func (c *Client) doJSON(ctx context.Context, r request, in, out any) (*http.Response, error) {
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s: encoding the request: %w", r.op, err)
		}
		r.body = b
	}
	resp, body, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return nil, fmt.Errorf("%s%s: unexpected answer from E2B: %w", r.op, inSandbox(r.sandbox), err)
		}
	}
	return resp, nil
}

// userAgent identifies agentctl to E2B.
const userAgent = "agentctl-e2b/1"
