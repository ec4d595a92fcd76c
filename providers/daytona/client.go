// Package daytona is the Daytona sandbox provider: a small REST client
// whose names mirror the Daytona Go SDK's (Client.Create/Get/List,
// Sandbox.Start/Stop/Delete/WaitForStart, Process.ExecuteCommand and
// sessions, FileSystem upload/download, GetPreviewLink and
// GetSignedPreviewLink), written against the published OpenAPI documents
// (vendored in internal/fakedaytona/testdata), and a sandbox.Provider built on it.
package daytona

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

const (
	// DefaultAPIURL is Daytona's public API.
	DefaultAPIURL = "https://app.daytona.io/api"

	// clientSource is sent as X-Daytona-Source.
	clientSource = "agentctl"
	// sdkCompatVersion is sent as X-Daytona-SDK-Version. The toolbox daemon
	// gates wire behaviour on it: for versions >= 0.167.0 session command
	// logs come back as JSON with stdout and stderr separated (older
	// clients get one interleaved text stream). Keep it at or above that.
	sdkCompatVersion = "0.170.0"
)

// Config configures a Client. APIKey, or JWTToken with OrganizationID, is
// required. Credentials are only ever placed in request headers.
type Config struct {
	APIKey         string
	JWTToken       string
	OrganizationID string
	// APIURL defaults to DefaultAPIURL.
	APIURL string
	// Target is the region sandboxes are created in ("" = the org default).
	Target string
	// HTTPClient defaults to a client without an overall timeout (long
	// downloads and commands are bounded by contexts instead).
	HTTPClient *http.Client
}

// Client talks to the Daytona API. It is safe for concurrent use.
type Client struct {
	apiURL  string
	token   string
	orgID   string
	target  string
	http    *http.Client
	retries int // attempts for retryable failures
	// sleep waits between retries and polls; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
	// pollInterval is the first interval of state polling (SDK: 100ms).
	pollInterval time.Duration
}

// NewClient validates cfg and returns a client.
func NewClient(cfg Config) (*Client, error) {
	token := cfg.APIKey
	if token == "" {
		token = cfg.JWTToken
		if token == "" {
			return nil, errors.New("no credentials: set DAYTONA_API_KEY (or DAYTONA_JWT_TOKEN together with DAYTONA_ORGANIZATION_ID), or api_key in the provider \"daytona\" block")
		}
		if cfg.OrganizationID == "" {
			return nil, errors.New("DAYTONA_JWT_TOKEN needs DAYTONA_ORGANIZATION_ID (or organization_id in the provider block): a JWT is not bound to one organization")
		}
	}
	api := strings.TrimRight(cfg.APIURL, "/")
	if api == "" {
		api = DefaultAPIURL
	}
	u, err := url.Parse(api)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api_url %q is not an http(s) URL; set DAYTONA_API_URL or api_url to e.g. %s", api, DefaultAPIURL)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	c := &Client{
		apiURL:       api,
		token:        token,
		target:       cfg.Target,
		http:         hc,
		retries:      5,
		sleep:        hosted.Sleep,
		pollInterval: 100 * time.Millisecond,
	}
	if cfg.APIKey == "" {
		c.orgID = cfg.OrganizationID
	}
	return c, nil
}

// request describes one HTTP call.
type request struct {
	method string
	url    string // absolute
	query  url.Values
	// body is sent as is; it is a byte slice so retries can resend it.
	body        []byte
	contentType string
	op          string // for messages
	sandbox     string // for messages
	// idempotent requests are retried on 5xx too; others only on 429
	// (a rate-limited request was not processed).
	idempotent bool
	// stream keeps the response body open for the caller.
	stream bool
}

// scrub removes credentials from a server message.
func (c *Client) scrub(s string) string { return hosted.Scrub(s, c.token) }

// setHeaders sets what every request carries: the credentials and the
// SDK identification.
func (c *Client) setHeaders(h http.Header) {
	h.Set("Authorization", "Bearer "+c.token)
	h.Set("X-Daytona-Source", clientSource)
	h.Set("X-Daytona-SDK-Version", sdkCompatVersion)
	h.Set("User-Agent", clientSource+"/"+sdkCompatVersion)
	if c.orgID != "" {
		h.Set("X-Daytona-Organization-ID", c.orgID)
	}
}

// do sends r with the retry policy: 429 is retried honouring Retry-After,
// 500/502/503/504 are retried with exponential backoff and jitter for
// idempotent requests. Non-2xx answers become *APIError. On success the
// caller owns resp.Body.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	u := r.url
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	backoff := hosted.FirstBackoff
	for attempt := 1; ; attempt++ {
		var body io.Reader
		if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, u, body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.op, err)
		}
		c.setHeaders(req.Header)
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s%s: %w", r.op, inSandbox(r.sandbox), ctx.Err())
			}
			// Connection errors: retry idempotent requests.
			if r.idempotent && attempt < c.retries {
				if serr := c.sleep(ctx, hosted.Jitter(backoff)); serr != nil {
					return nil, fmt.Errorf("%s%s: %w", r.op, inSandbox(r.sandbox), serr)
				}
				backoff = hosted.NextBackoff(backoff)
				continue
			}
			return nil, fmt.Errorf("%s%s: cannot reach the Daytona API at %s (%v); check DAYTONA_API_URL and your network", r.op, inSandbox(r.sandbox), c.apiURL, c.scrub(errors.Unwrap(err).Error()))
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			if !r.stream {
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return nil, fmt.Errorf("%s%s: reading response: %w", r.op, inSandbox(r.sandbox), err)
				}
				resp.Body = io.NopCloser(bytes.NewReader(b))
			}
			return resp, nil
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		apiErr := apiError(r.op, r.sandbox, resp.StatusCode, c.scrub(hosted.ServerMessage(b)), attempt)
		wait, retry := hosted.RetryWait(resp.StatusCode, resp.Header, r.idempotent, backoff)
		if !retry || attempt >= c.retries {
			return nil, apiErr
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%w (%v while waiting to retry)", apiErr, err)
		}
		backoff = hosted.NextBackoff(backoff)
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
func (c *Client) doJSON(ctx context.Context, r request, in, out any) error {
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: encoding request: %w", r.op, err)
		}
		r.body = b
		r.contentType = "application/json"
	}
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s%s: unexpected answer from Daytona: %w", r.op, inSandbox(r.sandbox), err)
	}
	return nil
}

func (c *Client) api(path string) string { return c.apiURL + path }
