package runloop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/internal/hosted"
)

// DefaultBaseURL is Runloop's API.
const DefaultBaseURL = "https://api.runloop.ai"

const userAgent = "agentctl-runloop/1"

// Config configures a Client.
type Config struct {
	// APIKey is the bearer token (RUNLOOP_API_KEY).
	APIKey string
	// BaseURL is the API's URL (RUNLOOP_BASE_URL; DefaultBaseURL).
	BaseURL    string
	HTTPClient *http.Client
}

// Client speaks Runloop's REST API (the devbox endpoints of
// api.runloop.ai, as Runloop's published clients define them). It retries
// 429 and 503 (and, for requests safe to repeat, 500, 502 and 504 and
// transport errors) with Retry-After or exponential backoff.
type Client struct {
	base    string
	key     string
	http    *http.Client
	retries int
	sleep   func(ctx context.Context, d time.Duration) error
}

// NewClient checks cfg and returns a client.
func NewClient(cfg Config) (*Client, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("no API key: set RUNLOOP_API_KEY in the environment, or api_key = env(\"RUNLOOP_API_KEY\") in the provider \"runloop\" block")
	}
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("base_url %q is not an http(s) URL; leave it unset to use %s", base, DefaultBaseURL)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: base, key: cfg.APIKey, http: hc, retries: 5, sleep: hosted.Sleep}, nil
}

// request is one API call.
type request struct {
	method, path string
	query        url.Values
	body         []byte
	contentType  string
	op           string // for messages
	devbox       string
	idempotent   bool
}

// APIError is a non-2xx answer, with a message that names the operation
// and the devbox and says what to do. It never holds the API key.
type APIError = hosted.APIError

// hints are Runloop's words for the statuses it answers.
var hints = &hosted.Hints{
	Unauthorized: hosted.Hint{Lead: "Runloop rejected the API key", Fix: "set RUNLOOP_API_KEY to a valid key from the Runloop dashboard"},
	Forbidden:    hosted.Hint{Lead: "access denied"},
	NotFound:     hosted.Hint{Lead: "not found", Fix: "the devbox was shut down, or the blueprint or snapshot does not exist"},
	RateLimited:  hosted.Hint{Lead: "rate limited by Runloop", Fix: "lower -parallelism or raise your account's limits"},
	ServerError:  hosted.Hint{Lead: "Runloop server error", Fix: "retry later"},
}

// apiError is the error of a failed answer to op about devbox.
func apiError(op, devbox string, status int, msg string, attempts int) *APIError {
	target := ""
	if devbox != "" {
		target = "devbox " + devbox
	}
	return &APIError{Op: op, Target: target, Status: status, Message: msg, Attempts: attempts, Hints: hints}
}

// IsNotFound reports whether err is Runloop's 404.
func IsNotFound(err error) bool { return hosted.IsNotFound(err) }

func (c *Client) scrub(s string) string { return hosted.Scrub(s, c.key) }

// do sends r, retrying what Runloop documents as retryable.
func (c *Client) do(ctx context.Context, r request) ([]byte, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	backoff := hosted.FirstBackoff
	for attempt := 1; ; attempt++ {
		status, hdr, body, err := c.send(ctx, r, u)
		wait, retry := hosted.Jitter(backoff), r.idempotent && ctx.Err() == nil
		if err == nil && status >= 200 && status < 300 {
			return body, nil
		} else if err == nil {
			err = apiError(r.op, r.devbox, status, c.scrub(hosted.ServerMessage(body)), attempt)
			wait, retry = hosted.RetryWait(status, hdr, r.idempotent, backoff)
		}
		if !retry || attempt >= c.retries {
			return nil, err
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("%w (%v while waiting to retry)", err, serr)
		}
		backoff = hosted.NextBackoff(backoff)
	}
}

func (c *Client) send(ctx context.Context, r request, u string) (int, http.Header, []byte, error) {
	var rd io.Reader
	if r.body != nil {
		rd = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s: %w", r.op, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("User-Agent", userAgent)
	if r.body != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, nil, fmt.Errorf("%s: %w", r.op, ctx.Err())
		}
		return 0, nil, nil, fmt.Errorf("%s: cannot reach the Runloop API at %s (%v); check base_url (RUNLOOP_BASE_URL) and your network", r.op, c.base, c.scrub(err.Error()))
	}
	defer resp.Body.Close()
	limit := int64(1 << 30)
	if resp.StatusCode >= 300 {
		limit = 64 << 10
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s: reading the answer: %w", r.op, err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

// call sends in as JSON (when not nil) and decodes the answer into out.
func (c *Client) call(ctx context.Context, r request, in, out any) error {
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: encoding the request: %w", r.op, err)
		}
		r.body = b
	}
	body, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%s: unexpected answer from Runloop: %w", r.op, err)
		}
	}
	return nil
}

// Devbox statuses.
const (
	StatusRunning   = "running"
	StatusSuspended = "suspended"
	StatusShutdown  = "shutdown"
	StatusFailure   = "failure"
)

// AfterIdle is what Runloop does with an idle devbox.
type AfterIdle struct {
	IdleTimeSeconds int    `json:"idle_time_seconds"`
	OnIdle          string `json:"on_idle"`
}

// LaunchParameters are a devbox's resources and lifecycle.
type LaunchParameters struct {
	AfterIdle            *AfterIdle `json:"after_idle,omitempty"`
	Architecture         string     `json:"architecture,omitempty"`
	CustomCPUCores       int        `json:"custom_cpu_cores,omitempty"`
	CustomDiskSize       int        `json:"custom_disk_size,omitempty"`
	CustomGBMemory       int        `json:"custom_gb_memory,omitempty"`
	KeepAliveTimeSeconds int        `json:"keep_alive_time_seconds,omitempty"`
	LaunchCommands       []string   `json:"launch_commands,omitempty"`
	NetworkPolicyID      string     `json:"network_policy_id,omitempty"`
	ResourceSizeRequest  string     `json:"resource_size_request,omitempty"`
}

// CreateParams create a devbox.
type CreateParams struct {
	BlueprintID   string            `json:"blueprint_id,omitempty"`
	BlueprintName string            `json:"blueprint_name,omitempty"`
	SnapshotID    string            `json:"snapshot_id,omitempty"`
	Env           map[string]string `json:"environment_variables,omitempty"`
	// Secrets maps environment variable names to Runloop secret names.
	Secrets  map[string]string `json:"secrets,omitempty"`
	Launch   *LaunchParameters `json:"launch_parameters,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Name     string            `json:"name,omitempty"`
}

// Devbox is a devbox as the API describes it.
type Devbox struct {
	ID             string            `json:"id"`
	Status         string            `json:"status"`
	Metadata       map[string]string `json:"metadata"`
	FailureReason  string            `json:"failure_reason,omitempty"`
	ShutdownReason string            `json:"shutdown_reason,omitempty"`
	Tunnel         *Tunnel           `json:"tunnel,omitempty"`
}

// Tunnel is a devbox's V2 tunnel: port P is served at
// https://P-<key>.tunnel.runloop.ai.
type Tunnel struct {
	AuthMode  string `json:"auth_mode"`
	TunnelKey string `json:"tunnel_key"`
}

// Create creates a devbox (not idempotent: never retried on a lost
// answer; the provider looks for what it made by metadata instead).
func (c *Client) Create(ctx context.Context, p CreateParams) (*Devbox, error) {
	var d Devbox
	err := c.call(ctx, request{method: http.MethodPost, path: "/v1/devboxes", op: "create devbox"}, p, &d)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// Get returns a devbox.
func (c *Client) Get(ctx context.Context, id string) (*Devbox, error) {
	var d Devbox
	err := c.call(ctx, request{method: http.MethodGet, path: "/v1/devboxes/" + url.PathEscape(id), op: "get devbox", devbox: id, idempotent: true}, nil, &d)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// List returns the devboxes with status (all when empty) whose metadata
// holds every pair of match (Runloop filters devboxes by status only, so
// metadata is matched here), following pages.
func (c *Client) List(ctx context.Context, status string, match map[string]string) ([]*Devbox, error) {
	var out []*Devbox
	after := ""
	for {
		q := url.Values{"limit": {"100"}, "include_total_count": {"false"}}
		if status != "" {
			q.Set("status", status)
		}
		if after != "" {
			q.Set("starting_after", after)
		}
		var page struct {
			Devboxes []*Devbox `json:"devboxes"`
			HasMore  bool      `json:"has_more"`
		}
		if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/devboxes", query: q, op: "list devboxes", idempotent: true}, nil, &page); err != nil {
			return nil, err
		}
		for _, d := range page.Devboxes {
			if matches(d.Metadata, match) {
				out = append(out, d)
			}
		}
		if !page.HasMore || len(page.Devboxes) == 0 {
			return out, nil
		}
		after = page.Devboxes[len(page.Devboxes)-1].ID
	}
}

func matches(m, want map[string]string) bool {
	for k, v := range want {
		if m[k] != v {
			return false
		}
	}
	return true
}

// lifecycle posts to /v1/devboxes/{id}/<verb>.
func (c *Client) lifecycle(ctx context.Context, id, verb, op string) (*Devbox, error) {
	var d Devbox
	err := c.call(ctx, request{method: http.MethodPost, path: "/v1/devboxes/" + url.PathEscape(id) + "/" + verb, op: op, devbox: id, idempotent: true}, nil, &d)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// Shutdown shuts a devbox down (Runloop deletes it).
func (c *Client) Shutdown(ctx context.Context, id string) (*Devbox, error) {
	return c.lifecycle(ctx, id, "shutdown", "shut down devbox")
}

// Suspend suspends a devbox: its disk is kept, its compute released.
func (c *Client) Suspend(ctx context.Context, id string) (*Devbox, error) {
	return c.lifecycle(ctx, id, "suspend", "suspend devbox")
}

// Resume resumes a suspended devbox.
func (c *Client) Resume(ctx context.Context, id string) (*Devbox, error) {
	return c.lifecycle(ctx, id, "resume", "resume devbox")
}

// KeepAlive resets a devbox's idle timer.
func (c *Client) KeepAlive(ctx context.Context, id string) error {
	return c.call(ctx, request{method: http.MethodPost, path: "/v1/devboxes/" + url.PathEscape(id) + "/keep_alive", op: "keep devbox alive", devbox: id, idempotent: true}, nil, nil)
}

// Execution is an asynchronous command's state.
type Execution struct {
	DevboxID    string `json:"devbox_id"`
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
	ExitStatus  *int   `json:"exit_status,omitempty"`
	Stdout      string `json:"stdout,omitempty"`
	Stderr      string `json:"stderr,omitempty"`
}

// ExecuteAsync starts command with the devbox's shell.
func (c *Client) ExecuteAsync(ctx context.Context, id, command string) (*Execution, error) {
	var e Execution
	err := c.call(ctx, request{method: http.MethodPost, path: "/v1/devboxes/" + url.PathEscape(id) + "/execute_async", op: "execute", devbox: id},
		map[string]any{"command": command}, &e)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// WaitExecution waits (at most 25s, Runloop's longest) for the execution
// to complete and returns its state.
func (c *Client) WaitExecution(ctx context.Context, id, exec string, wait time.Duration) (*Execution, error) {
	var e Execution
	secs := max(min(int(wait/time.Second), 25), 1)
	err := c.call(ctx, request{method: http.MethodPost, path: "/v1/devboxes/" + url.PathEscape(id) + "/executions/" + url.PathEscape(exec) + "/wait_for_status", op: "wait for command", devbox: id, idempotent: true},
		map[string]any{"statuses": []string{"completed"}, "timeout_seconds": secs}, &e)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// KillExecution kills an execution's process group.
func (c *Client) KillExecution(ctx context.Context, id, exec string) error {
	return c.call(ctx, request{method: http.MethodPost, path: "/v1/devboxes/" + url.PathEscape(id) + "/executions/" + url.PathEscape(exec) + "/kill", op: "kill command", devbox: id, idempotent: true},
		map[string]any{"kill_process_group": true}, nil)
}

// Upload writes data to the absolute path p in the devbox.
func (c *Client) Upload(ctx context.Context, id, p string, data []byte) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("path", p); err != nil {
		return err
	}
	fw, err := mw.CreateFormFile("file", "upload")
	if err != nil {
		return err
	}
	if _, err := fw.Write(data); err != nil {
		return err
	}
	if err := mw.Close(); err != nil {
		return err
	}
	_, err = c.do(ctx, request{method: http.MethodPost, path: "/v1/devboxes/" + url.PathEscape(id) + "/upload_file", body: buf.Bytes(),
		contentType: mw.FormDataContentType(), op: "upload " + p, devbox: id, idempotent: true})
	return err
}

// Download returns the bytes of the file at the absolute path p.
func (c *Client) Download(ctx context.Context, id, p string) ([]byte, error) {
	b, err := json.Marshal(map[string]string{"path": p})
	if err != nil {
		return nil, err
	}
	return c.do(ctx, request{method: http.MethodPost, path: "/v1/devboxes/" + url.PathEscape(id) + "/download_file", body: b, op: "download " + p, devbox: id, idempotent: true})
}

// Snapshot is a disk snapshot.
type Snapshot struct {
	ID           string            `json:"id"`
	Name         string            `json:"name,omitempty"`
	Metadata     map[string]string `json:"metadata"`
	SourceDevbox string            `json:"source_devbox_id"`
}

// SnapshotDisk snapshots a devbox's disk.
func (c *Client) SnapshotDisk(ctx context.Context, id, name string, metadata map[string]string) (*Snapshot, error) {
	var s Snapshot
	err := c.call(ctx, request{method: http.MethodPost, path: "/v1/devboxes/" + url.PathEscape(id) + "/snapshot_disk", op: "snapshot devbox disk", devbox: id},
		map[string]any{"name": name, "metadata": metadata}, &s)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// Snapshots lists the disk snapshots whose metadata key has value.
func (c *Client) Snapshots(ctx context.Context, key, value string) ([]*Snapshot, error) {
	var out []*Snapshot
	after := ""
	for {
		q := url.Values{"limit": {"100"}, "include_total_count": {"false"}, "metadata[" + key + "]": {value}}
		if after != "" {
			q.Set("starting_after", after)
		}
		var page struct {
			Snapshots []*Snapshot `json:"snapshots"`
			HasMore   bool        `json:"has_more"`
		}
		if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/devboxes/disk_snapshots", query: q, op: "list disk snapshots", idempotent: true}, nil, &page); err != nil {
			return nil, err
		}
		for _, s := range page.Snapshots {
			if s.Metadata[key] == value {
				out = append(out, s)
			}
		}
		if !page.HasMore || len(page.Snapshots) == 0 {
			return out, nil
		}
		after = page.Snapshots[len(page.Snapshots)-1].ID
	}
}

// DeleteSnapshot deletes a disk snapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	return c.call(ctx, request{method: http.MethodPost, path: "/v1/devboxes/disk_snapshots/" + url.PathEscape(id) + "/delete", op: "delete disk snapshot " + id, idempotent: true}, nil, nil)
}

// EnableTunnel gives the devbox a tunnel (open: its ports are public, as
// other providers' previews are) and returns it.
func (c *Client) EnableTunnel(ctx context.Context, id string) (*Tunnel, error) {
	var t Tunnel
	err := c.call(ctx, request{method: http.MethodPost, path: "/v1/devboxes/" + url.PathEscape(id) + "/enable_tunnel", op: "enable tunnel", devbox: id, idempotent: true},
		map[string]any{"auth_mode": "open"}, &t)
	if err != nil {
		return nil, err
	}
	return &t, nil
}
