package daytona

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Sandbox states (api.openapi.yaml SandboxState) the client acts on.
const (
	StateCreating     = "creating"
	StateStarted      = "started"
	StateStarting     = "starting"
	StateStopped      = "stopped"
	StateStopping     = "stopping"
	StateArchived     = "archived"
	StateArchiving    = "archiving"
	StateError        = "error"
	StateBuildFailed  = "build_failed"
	StatePendingBuild = "pending_build"
	StateDestroyed    = "destroyed"
	StateDestroying   = "destroying"
	StatePaused       = "paused"
)

// CreateParams is the CreateSandbox request body (the fields agentctl
// uses). Snapshot and Image are exclusive; Image becomes a build from
// "FROM <image>", as the SDKs do. Resources are only valid with Image.
type CreateParams struct {
	Name                string
	Snapshot            string
	Image               string
	User                string
	Env                 map[string]string
	Labels              map[string]string
	Public              bool
	NetworkBlockAll     bool
	NetworkAllowList    string
	AutoStopInterval    *int
	AutoArchiveInterval *int
	AutoDeleteInterval  *int
	CPU, Memory, Disk   int // cores, GB, GB; 0 = default
	GPU                 int
}

// createSandboxBody mirrors the CreateSandbox schema.
type createSandboxBody struct {
	Name                string            `json:"name,omitempty"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    string            `json:"networkAllowList,omitempty"`
	Target              string            `json:"target,omitempty"`
	CPU                 int               `json:"cpu,omitempty"`
	GPU                 int               `json:"gpu,omitempty"`
	Memory              int               `json:"memory,omitempty"`
	Disk                int               `json:"disk,omitempty"`
	AutoStopInterval    *int              `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval,omitempty"`
	BuildInfo           *createBuildInfo  `json:"buildInfo,omitempty"`
}

type createBuildInfo struct {
	DockerfileContent string `json:"dockerfileContent"`
}

// sandboxDTO is the part of the Sandbox schema the client reads.
type sandboxDTO struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	State           string            `json:"state"`
	ErrorReason     string            `json:"errorReason"`
	Recoverable     bool              `json:"recoverable"`
	Labels          map[string]string `json:"labels"`
	Public          bool              `json:"public"`
	Target          string            `json:"target"`
	ToolboxProxyURL string            `json:"toolboxProxyUrl"`
	Snapshot        string            `json:"snapshot"`
}

// Sandbox is one Daytona sandbox, as the SDK's Sandbox.
type Sandbox struct {
	client *Client
	// addr names the sandbox in messages (its config address, or its id).
	addr string

	ID          string
	Name        string
	State       string
	ErrorReason string
	Recoverable bool
	Labels      map[string]string
	Public      bool
	Target      string
	// ToolboxProxyURL is the base of this sandbox's toolbox API; requests
	// go to {ToolboxProxyURL}/{ID}/{endpoint}.
	ToolboxProxyURL string

	Process    *Process
	FileSystem *FileSystem
}

func (c *Client) newSandbox(d sandboxDTO, addr string) *Sandbox {
	s := &Sandbox{client: c, addr: addr}
	s.populate(d)
	s.Process = &Process{s: s}
	s.FileSystem = &FileSystem{s: s}
	return s
}

func (s *Sandbox) populate(d sandboxDTO) {
	s.ID, s.Name, s.State, s.ErrorReason, s.Recoverable = d.ID, d.Name, d.State, d.ErrorReason, d.Recoverable
	s.Labels, s.Public, s.Target, s.ToolboxProxyURL = d.Labels, d.Public, d.Target, d.ToolboxProxyURL
	if s.addr == "" {
		s.addr = d.ID
	}
}

// SetAddress sets the name used for this sandbox in error messages.
func (s *Sandbox) SetAddress(addr string) { s.addr = addr }

func (s *Sandbox) where() string {
	if s.addr != "" && s.addr != s.ID {
		return s.addr + ", id " + s.ID
	}
	return s.ID
}

// toolbox returns the URL of a toolbox endpoint ("/files/info").
func (s *Sandbox) toolbox(endpoint string) string {
	return strings.TrimRight(s.ToolboxProxyURL, "/") + "/" + url.PathEscape(s.ID) + endpoint
}

// UserHomeDir returns the home directory of the sandbox's user (toolbox
// GET /user-home-dir). The sandbox must be started.
func (s *Sandbox) UserHomeDir(ctx context.Context) (string, error) {
	var out struct {
		Dir string `json:"dir"`
	}
	if err := s.client.doJSON(ctx, request{method: http.MethodGet, url: s.toolbox("/user-home-dir"), op: "get user home directory", sandbox: s.where(), idempotent: true}, nil, &out); err != nil {
		return "", err
	}
	return out.Dir, nil
}

// Create creates a sandbox and, when timeout > 0, waits until it is
// started (failing fast on error or build_failed with the server's
// reason). addr names it in messages.
func (c *Client) Create(ctx context.Context, p CreateParams, addr string, timeout time.Duration) (*Sandbox, error) {
	if p.Snapshot != "" && p.Image != "" {
		return nil, fmt.Errorf("create sandbox (%s): both snapshot %q and image %q are set; choose one", addr, p.Snapshot, p.Image)
	}
	if p.Snapshot != "" && (p.CPU > 0 || p.Memory > 0 || p.Disk > 0 || p.GPU > 0) {
		return nil, fmt.Errorf("create sandbox (%s): resources cannot be set with snapshot %q (the snapshot fixes them); remove resources or use image instead", addr, p.Snapshot)
	}
	body := createSandboxBody{
		Name: p.Name, Snapshot: p.Snapshot, User: p.User, Env: p.Env, Labels: p.Labels,
		Public: p.Public, NetworkBlockAll: p.NetworkBlockAll, NetworkAllowList: p.NetworkAllowList,
		Target: c.target, CPU: p.CPU, GPU: p.GPU, Memory: p.Memory, Disk: p.Disk,
		AutoStopInterval: p.AutoStopInterval, AutoArchiveInterval: p.AutoArchiveInterval, AutoDeleteInterval: p.AutoDeleteInterval,
	}
	if p.Image != "" {
		body.BuildInfo = &createBuildInfo{DockerfileContent: "FROM " + p.Image}
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	var d sandboxDTO
	if err := c.doJSON(ctx, request{method: http.MethodPost, url: c.api("/sandbox"), op: "create sandbox", sandbox: addr}, body, &d); err != nil {
		return nil, err
	}
	s := c.newSandbox(d, addr)
	if s.State == StateError || s.State == StateBuildFailed {
		return s, s.failed("create sandbox")
	}
	if timeout > 0 && s.State != StateStarted {
		if err := s.waitFor(ctx, "create sandbox", StateStarted, timeout); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Get fetches a sandbox by id or name.
func (c *Client) Get(ctx context.Context, idOrName, addr string) (*Sandbox, error) {
	var d sandboxDTO
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.api("/sandbox/" + url.PathEscape(idOrName)), op: "get sandbox", sandbox: orID(addr, idOrName), idempotent: true}, nil, &d); err != nil {
		return nil, err
	}
	return c.newSandbox(d, addr), nil
}

func orID(addr, id string) string {
	if addr == "" {
		return id
	}
	return addr + ", id " + id
}

// List returns the sandboxes carrying every label in labels, following
// the cursor through all pages.
func (c *Client) List(ctx context.Context, labels map[string]string) ([]*Sandbox, error) {
	var out []*Sandbox
	q := url.Values{}
	if len(labels) > 0 {
		b, _ := json.Marshal(labels)
		q.Set("labels", string(b))
	}
	for {
		var page struct {
			Items      []sandboxDTO `json:"items"`
			NextCursor *string      `json:"nextCursor"`
		}
		if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.api("/sandbox"), query: q, op: "list sandboxes", idempotent: true}, nil, &page); err != nil {
			return nil, err
		}
		for _, d := range page.Items {
			out = append(out, c.newSandbox(d, ""))
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			return out, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// RefreshData reloads the sandbox from the API.
func (s *Sandbox) RefreshData(ctx context.Context) error {
	var d sandboxDTO
	if err := s.client.doJSON(ctx, request{method: http.MethodGet, url: s.client.api("/sandbox/" + url.PathEscape(s.ID)), op: "get sandbox", sandbox: s.where(), idempotent: true}, nil, &d); err != nil {
		return err
	}
	addr := s.addr
	s.populate(d)
	s.addr = addr
	return nil
}

// Start starts a stopped or archived sandbox (or resumes a paused one)
// and waits up to timeout for it to be started. Starting a started
// sandbox is a no-op.
func (s *Sandbox) Start(ctx context.Context, timeout time.Duration) error {
	if s.State == StateStarted {
		return nil
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	var d sandboxDTO
	if err := s.client.doJSON(ctx, request{method: http.MethodPost, url: s.client.api("/sandbox/" + url.PathEscape(s.ID) + "/start"), op: "start sandbox", sandbox: s.where(), idempotent: true}, nil, &d); err != nil {
		return err
	}
	s.setState(d)
	return s.WaitForStart(ctx, timeout)
}

func (s *Sandbox) setState(d sandboxDTO) {
	if d.State != "" {
		s.State, s.ErrorReason = d.State, d.ErrorReason
	}
}

// Stop stops the sandbox and waits up to timeout for it to be stopped.
func (s *Sandbox) Stop(ctx context.Context, timeout time.Duration) error {
	if s.State == StateStopped || s.State == StateArchived {
		return nil
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	var d sandboxDTO
	if err := s.client.doJSON(ctx, request{method: http.MethodPost, url: s.client.api("/sandbox/" + url.PathEscape(s.ID) + "/stop"), op: "stop sandbox", sandbox: s.where(), idempotent: true}, nil, &d); err != nil {
		return err
	}
	s.setState(d)
	return s.waitFor(ctx, "stop sandbox", StateStopped, timeout)
}

// Delete deletes the sandbox. A sandbox that is already gone is not an
// error.
func (s *Sandbox) Delete(ctx context.Context) error {
	err := s.client.doJSON(ctx, request{method: http.MethodDelete, url: s.client.api("/sandbox/" + url.PathEscape(s.ID)), op: "delete sandbox", sandbox: s.where(), idempotent: true}, nil, nil)
	if err != nil && !IsNotFound(err) {
		return err
	}
	s.State = StateDestroyed
	return nil
}

// WaitForStart polls until the sandbox is started, with the SDK's
// backoff: every 100ms for the first 5s, then 10% longer each time up to
// 1s. It fails fast on error or build_failed with the server's reason.
func (s *Sandbox) WaitForStart(ctx context.Context, timeout time.Duration) error {
	return s.waitFor(ctx, "start sandbox", StateStarted, timeout)
}

func (s *Sandbox) waitFor(ctx context.Context, op, want string, timeout time.Duration) error {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	interval := s.client.pollInterval
	start := time.Now()
	for {
		if s.State == want {
			return nil
		}
		if s.State == StateError || s.State == StateBuildFailed {
			return s.failed(op)
		}
		if want == StateStarted && (s.State == StateDestroyed || s.State == StateDestroying) {
			return fmt.Errorf("%s (%s): the sandbox is being destroyed", op, s.where())
		}
		if err := s.client.sleep(ctx, interval); err != nil {
			return s.timeoutErr(op, want, timeout, err)
		}
		if err := s.RefreshData(ctx); err != nil {
			if ctx.Err() != nil {
				return s.timeoutErr(op, want, timeout, ctx.Err())
			}
			return err
		}
		if time.Since(start) > 5*time.Second {
			interval = min(time.Duration(float64(interval)*1.1), time.Second)
		}
	}
}

func (s *Sandbox) timeoutErr(op, want string, timeout time.Duration, err error) error {
	if timeout > 0 && err == context.DeadlineExceeded {
		return fmt.Errorf("%s (%s): still %q, not %q, after %s; raise the create_timeout/start_timeout setting or check the sandbox in the Daytona dashboard", op, s.where(), s.State, want, timeout)
	}
	return fmt.Errorf("%s (%s): %w", op, s.where(), err)
}

func (s *Sandbox) failed(op string) error {
	reason := s.ErrorReason
	if reason == "" {
		reason = "no reason given"
	}
	if s.State == StateBuildFailed {
		return fmt.Errorf("%s (%s): the image build failed: %s; check that the image exists and is pullable", op, s.where(), reason)
	}
	return fmt.Errorf("%s (%s): the sandbox is in state error: %s", op, s.where(), reason)
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
