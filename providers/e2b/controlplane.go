package e2b

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"
)

// Sandbox states (the SandboxState schema).
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// CreateParams is the NewSandbox request body (the fields agentctl uses).
type CreateParams struct {
	Template string
	// Timeout is the sandbox's time to live: E2B kills (or, with
	// AutoPause, pauses) it when it passes. Whole seconds, at least 1.
	Timeout   time.Duration
	AutoPause bool
	// AllowInternetAccess is nil to keep E2B's default (allowed).
	AllowInternetAccess *bool
	Metadata            map[string]string
	EnvVars             map[string]string
}

type newSandboxBody struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int               `json:"timeout"`
	AutoPause           bool              `json:"autoPause"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
}

// sandboxDTO holds the fields of the Sandbox, SandboxDetail and
// ListedSandbox schemas the client reads.
type sandboxDTO struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken"`
	Domain          *string           `json:"domain"`
	State           string            `json:"state"`
	Metadata        map[string]string `json:"metadata"`
	EndAt           time.Time         `json:"endAt"`
}

// Sandbox is one E2B sandbox as the control plane describes it.
type Sandbox struct {
	c *Client
	// addr names the sandbox in messages (its configuration address).
	addr string

	ID              string
	TemplateID      string
	EnvdVersion     string
	EnvdAccessToken string
	// Domain is where the sandbox's hosts are (<port>-<id>.<Domain>).
	Domain   string
	State    string
	Metadata map[string]string
	EndAt    time.Time
}

func (c *Client) sandboxFrom(d sandboxDTO, addr string) *Sandbox {
	s := &Sandbox{c: c, addr: addr}
	s.update(d)
	return s
}

// update takes what d says; a Sandbox answer (create, connect) has no
// state and means running.
func (s *Sandbox) update(d sandboxDTO) {
	s.ID, s.TemplateID = d.SandboxID, d.TemplateID
	if d.EnvdVersion != "" {
		s.EnvdVersion = d.EnvdVersion
	}
	if d.EnvdAccessToken != "" {
		s.EnvdAccessToken = d.EnvdAccessToken
	}
	s.Domain = s.c.domain
	if d.Domain != nil && *d.Domain != "" {
		s.Domain = *d.Domain
	}
	s.State = d.State
	if s.State == "" {
		s.State = StateRunning
	}
	if d.Metadata != nil {
		s.Metadata = d.Metadata
	}
	if !d.EndAt.IsZero() {
		s.EndAt = d.EndAt
	}
}

func (s *Sandbox) where() string {
	if s.addr != "" && s.addr != s.ID {
		return s.addr + ", id " + s.ID
	}
	return s.ID
}

func seconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// Create creates a sandbox from a template; addr names it in messages.
// A create is sent again only when E2B answered 429 or 503 (nothing was
// created).
func (c *Client) Create(ctx context.Context, p CreateParams, addr string) (*Sandbox, error) {
	body := newSandboxBody{TemplateID: p.Template, Timeout: seconds(p.Timeout), AutoPause: p.AutoPause, Secure: true,
		AllowInternetAccess: p.AllowInternetAccess, Metadata: p.Metadata, EnvVars: p.EnvVars}
	var d sandboxDTO
	if _, err := c.doJSON(ctx, request{method: http.MethodPost, path: "/sandboxes", op: "create sandbox from template " + p.Template, sandbox: addr}, body, &d); err != nil {
		return nil, err
	}
	return c.sandboxFrom(d, addr), nil
}

// Get describes a sandbox (running or paused); a killed one is a 404.
func (c *Client) Get(ctx context.Context, id, addr string) (*Sandbox, error) {
	s := &Sandbox{c: c, addr: addr, ID: id}
	if err := s.Refresh(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Refresh reloads the sandbox's state, metadata and end time.
func (s *Sandbox) Refresh(ctx context.Context) error {
	var d sandboxDTO
	if _, err := s.c.doJSON(ctx, request{method: http.MethodGet, path: "/sandboxes/" + url.PathEscape(s.ID), op: "get sandbox", sandbox: s.where(), idempotent: true}, nil, &d); err != nil {
		return err
	}
	s.update(d)
	return nil
}

// List returns the running and paused sandboxes whose metadata holds
// every entry of metadata, following the pages.
func (c *Client) List(ctx context.Context, metadata map[string]string) ([]*Sandbox, error) {
	q := url.Values{"state": {StateRunning + "," + StatePaused}, "limit": {"100"}}
	if len(metadata) > 0 {
		q.Set("metadata", metadataQuery(metadata))
	}
	var out []*Sandbox
	for {
		var page []sandboxDTO
		resp, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/v2/sandboxes", query: q, op: "list sandboxes", idempotent: true}, nil, &page)
		if err != nil {
			return nil, err
		}
		for _, d := range page {
			out = append(out, c.sandboxFrom(d, ""))
		}
		next := resp.Header.Get("X-Next-Token")
		if next == "" || len(page) == 0 {
			return out, nil
		}
		q.Set("nextToken", next)
	}
}

// metadataQuery is the metadata filter as the API takes it: key=value
// pairs joined by &, each key and value URL-encoded.
func metadataQuery(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	v := url.Values{}
	for _, k := range keys {
		v.Set(k, m[k])
	}
	return v.Encode()
}

// Kill kills the sandbox; one already gone is not an error.
func (s *Sandbox) Kill(ctx context.Context) error {
	_, err := s.c.doJSON(ctx, request{method: http.MethodDelete, path: "/sandboxes/" + url.PathEscape(s.ID), op: "kill sandbox", sandbox: s.where(), idempotent: true}, nil, nil)
	if err != nil && !IsNotFound(err) {
		return err
	}
	return nil
}

// Pause pauses the sandbox with its memory; pausing a paused sandbox is
// not an error.
func (s *Sandbox) Pause(ctx context.Context) error {
	_, err := s.c.doJSON(ctx, request{method: http.MethodPost, path: "/sandboxes/" + url.PathEscape(s.ID) + "/pause", op: "pause sandbox", sandbox: s.where(), idempotent: true}, map[string]any{}, nil)
	if statusOf(err) == http.StatusConflict {
		// Already paused (or pausing): make sure.
		if rerr := s.Refresh(ctx); rerr == nil && s.State == StatePaused {
			return nil
		}
	}
	if err != nil {
		return err
	}
	s.State = StatePaused
	return nil
}

// Connect resumes a paused sandbox (a running one is left as it is) and
// sets its time to live to timeout from now; E2B only ever extends it.
func (s *Sandbox) Connect(ctx context.Context, timeout time.Duration) error {
	var d sandboxDTO
	_, err := s.c.doJSON(ctx, request{method: http.MethodPost, path: "/sandboxes/" + url.PathEscape(s.ID) + "/connect", op: "connect to sandbox", sandbox: s.where(), idempotent: true},
		map[string]int{"timeout": seconds(timeout)}, &d)
	if err != nil {
		return err
	}
	d.State = StateRunning
	s.update(d)
	return nil
}

// SetTimeout makes the sandbox expire timeout from now.
func (s *Sandbox) SetTimeout(ctx context.Context, timeout time.Duration) error {
	_, err := s.c.doJSON(ctx, request{method: http.MethodPost, path: "/sandboxes/" + url.PathEscape(s.ID) + "/timeout", op: "set sandbox timeout", sandbox: s.where(), idempotent: true},
		map[string]int{"timeout": seconds(timeout)}, nil)
	return err
}

// Snapshot is a persistent snapshot of a sandbox: a template new
// sandboxes can be created from.
type Snapshot struct {
	ID    string   `json:"snapshotID"`
	Names []string `json:"names"`
}

// CreateSnapshot snapshots the sandbox under name (a new build of the
// same template when the name exists).
func (s *Sandbox) CreateSnapshot(ctx context.Context, name string) (*Snapshot, error) {
	var out Snapshot
	_, err := s.c.doJSON(ctx, request{method: http.MethodPost, path: "/sandboxes/" + url.PathEscape(s.ID) + "/snapshots", op: fmt.Sprintf("snapshot sandbox as %q", name), sandbox: s.where()},
		map[string]string{"name": name}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Snapshots lists the snapshots whose name (or id) is name.
func (c *Client) Snapshots(ctx context.Context, name string) ([]Snapshot, error) {
	var out []Snapshot
	q := url.Values{"name": {name}, "limit": {"100"}}
	if _, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/snapshots", query: q, op: fmt.Sprintf("list snapshots named %q", name), idempotent: true}, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteTemplate deletes a template (a snapshot is one); one already
// gone is not an error.
func (c *Client) DeleteTemplate(ctx context.Context, id string) error {
	_, err := c.doJSON(ctx, request{method: http.MethodDelete, path: "/templates/" + url.PathEscape(id), op: fmt.Sprintf("delete snapshot %q", id), idempotent: true}, nil, nil)
	if err != nil && !IsNotFound(err) {
		return err
	}
	return nil
}
