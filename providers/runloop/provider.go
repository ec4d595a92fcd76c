package runloop

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// DefaultTunnelDomain is where Runloop serves tunnels.
const DefaultTunnelDomain = "tunnel.runloop.ai"

// Options configures the provider. Values left empty come from Environ
// (KEY=VALUE entries, normally os.Environ()): RUNLOOP_API_KEY and
// RUNLOOP_BASE_URL. The key is held in memory only.
type Options struct {
	APIKey, BaseURL string
	Environ         []string
	HTTPClient      *http.Client
	// TunnelDomain is the domain of tunnel URLs (DefaultTunnelDomain).
	TunnelDomain string
	// Poll is the interval between status checks (default 1s).
	Poll time.Duration
}

// Provider creates and reconnects to Runloop devboxes.
type Provider struct {
	client       *Client
	tunnelDomain string
	poll         time.Duration
}

// New returns a Runloop provider.
func New(opts Options) (*Provider, error) {
	pick := func(v, key string) string {
		if v != "" {
			return v
		}
		return registry.Getenv(opts.Environ, key)
	}
	c, err := NewClient(Config{APIKey: pick(opts.APIKey, "RUNLOOP_API_KEY"), BaseURL: pick(opts.BaseURL, "RUNLOOP_BASE_URL"), HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, err
	}
	p := &Provider{client: c, tunnelDomain: opts.TunnelDomain, poll: opts.Poll}
	if p.tunnelDomain == "" {
		p.tunnelDomain = DefaultTunnelDomain
	}
	if p.poll <= 0 {
		p.poll = time.Second
	}
	return p, nil
}

// Client returns the API client.
func (p *Provider) Client() *Client { return p.client }

// Kind implements sandbox.Provider.
func (p *Provider) Kind() string { return "runloop" }

// createParams maps spec and its settings to Runloop's create request.
func (p *Provider) createParams(ctx context.Context, spec sandbox.Spec, st *Settings) (CreateParams, error) {
	params := CreateParams{Metadata: sandbox.Labels(spec, nil), Name: spec.Address,
		Launch: &LaunchParameters{KeepAliveTimeSeconds: int(st.timeout() / time.Second)}}
	if st != nil {
		params.Metadata = sandbox.Labels(spec, st.Metadata)
		params.BlueprintName, params.BlueprintID = st.Blueprint, st.BlueprintID
		params.Env, params.Secrets = st.Env, st.Secrets
		params.Launch.ResourceSizeRequest = st.ResourceSize
		if r := st.Resources; r.CPUs > 0 || r.MemoryMB > 0 || r.DiskGB > 0 {
			params.Launch.ResourceSizeRequest = "CUSTOM_SIZE"
			params.Launch.CustomCPUCores, params.Launch.CustomGBMemory, params.Launch.CustomDiskSize = int(r.CPUs), int(r.MemoryMB/1024), int(r.DiskGB)
		}
		if st.IdleTimeout > 0 {
			on := st.OnIdle
			if on == "" {
				on = "shutdown"
			}
			params.Launch.AfterIdle = &AfterIdle{IdleTimeSeconds: int(st.IdleTimeout / time.Second), OnIdle: on}
		}
	}
	if spec.Image != "" {
		// The engine restores from a disk snapshot (Commit).
		id, err := p.ImageID(ctx, spec.Image)
		if err != nil {
			return CreateParams{}, fmt.Errorf("a Runloop devbox starts from a blueprint or a disk snapshot, not an image: %w", err)
		}
		params.SnapshotID, params.BlueprintName, params.BlueprintID = id, "", ""
	}
	return params, nil
}

// Create implements sandbox.Provider: it removes what an interrupted
// create left for the same address, creates the devbox with agentctl's
// metadata and the keep-alive time, waits until it runs and creates the
// workspace root. Whatever fails after Runloop made the devbox shuts it
// down.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	st, err := settingsOf(spec)
	if err != nil {
		return nil, err
	}
	if !spec.Accounts.Empty() {
		return nil, errors.New(noUsers + ": it cannot run commands as the manifest's users; remove the manifest's users and groups")
	}
	root, err := workspaceRoot(spec)
	if err != nil {
		return nil, err
	}
	params, err := p.createParams(ctx, spec, st)
	if err != nil {
		return nil, err
	}
	if err := p.removeLeftovers(ctx, spec); err != nil {
		return nil, err
	}
	d, err := p.client.Create(ctx, params)
	if err != nil {
		return nil, hosted.FailedCreate(ctx, err, "devbox", func(ctx context.Context) error {
			return p.removeLeftovers(ctx, spec)
		})
	}
	w := p.wrap(d, spec, st, root)
	if err := w.setup(ctx); err != nil {
		return nil, hosted.Discard(ctx, err, w.Delete, "shutting the devbox (id "+d.ID+") down", "shut it down in the Runloop dashboard")
	}
	return w, nil
}

func (w *Workspace) setup(ctx context.Context) error {
	if _, err := w.await(ctx, StatusRunning); err != nil {
		return err
	}
	_, code, stderr, err := w.run(ctx, "create the workspace root", "mkdir -p -- "+sandbox.ShellQuote(w.root))
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("creating the workspace root %s: %s (the devbox's user must be able to create it: set root in the manifest to a directory below its home, such as %s)", w.root, stderr, DefaultRoot)
	}
	return nil
}

// removeLeftovers shuts down the devboxes an interrupted create left
// behind: those whose metadata names this state's lineage and address.
func (p *Provider) removeLeftovers(ctx context.Context, spec sandbox.Spec) error {
	list := func(ctx context.Context) ([]*Devbox, error) {
		all, err := p.client.List(ctx, "", map[string]string{sandbox.LabelManaged: "true", sandbox.LabelLineage: spec.Lineage, sandbox.LabelAddress: spec.Address})
		if err != nil {
			return nil, fmt.Errorf("looking for devboxes an interrupted apply left behind: %w", err)
		}
		var live []*Devbox
		for _, d := range all {
			if d.Status != StatusShutdown && d.Status != StatusFailure {
				live = append(live, d)
			}
		}
		return live, nil
	}
	owner := func(d *Devbox) (string, string) {
		return d.Metadata[sandbox.LabelLineage], d.Metadata[sandbox.LabelAddress]
	}
	remove := func(ctx context.Context, d *Devbox) error {
		if _, err := p.client.Shutdown(ctx, d.ID); err != nil && !IsNotFound(err) {
			return fmt.Errorf("shutting down devbox %s, left behind by an interrupted apply: %w", d.ID, err)
		}
		return nil
	}
	return sandbox.RemoveLeftovers(ctx, spec, list, owner, remove)
}

// Open implements sandbox.Provider: it finds the devbox without resuming
// it. A devbox shut down, failed or unknown is sandbox.ErrNotFound.
func (p *Provider) Open(ctx context.Context, spec sandbox.Spec, ss sandbox.SessionState) (sandbox.Sandbox, error) {
	st, root, err := hosted.OpenArgs[Settings](ss, spec, "runloop", "devbox", DefaultRoot)
	if err != nil {
		return nil, err
	}
	d, err := p.client.Get(ctx, ss.ID)
	if err != nil {
		return nil, err
	}
	if d.Status == StatusShutdown || d.Status == StatusFailure {
		return nil, fmt.Errorf("devbox %s is %s: %w", d.ID, d.Status, sandbox.ErrNotFound)
	}
	return p.wrap(d, spec, st, root), nil
}

func workspaceRoot(spec sandbox.Spec) (string, error) {
	return hosted.WorkspaceRoot(spec.Root, DefaultRoot)
}

func (p *Provider) wrap(d *Devbox, spec sandbox.Spec, st *Settings, root string) *Workspace {
	return &Workspace{p: p, c: p.client, id: d.ID, spec: spec, st: st, root: root, extended: time.Now(), tunnel: d.Tunnel}
}

// Workspace is a Runloop devbox behind the sandbox.Sandbox interface. It
// has no PTY and no attached process streams (Runloop's executions
// return their output when they end): it does not implement
// sandbox.ProcessStarter, so those report sandbox.UnsupportedError.
type Workspace struct {
	p    *Provider
	c    *Client
	id   string
	spec sandbox.Spec
	st   *Settings
	root string

	mu       sync.Mutex
	extended time.Time
	tunnel   *Tunnel
}

var _ sandbox.Sandbox = (*Workspace)(nil)

// ID implements sandbox.Sandbox.
func (w *Workspace) ID() string { return w.id }

// Session implements sandbox.Sandbox; it holds no credentials.
func (w *Workspace) Session() sandbox.SessionState {
	return sandbox.SessionState{Provider: "runloop", ID: w.id}
}

// await polls the devbox until it has status want; a devbox that fails
// or shuts down meanwhile is an error.
func (w *Workspace) await(ctx context.Context, want string) (*Devbox, error) {
	for {
		d, err := w.c.Get(ctx, w.id)
		if err != nil {
			return nil, err
		}
		switch d.Status {
		case want:
			return d, nil
		case StatusFailure, StatusShutdown:
			why := d.FailureReason
			if why == "" {
				why = d.ShutdownReason
			}
			return nil, sandbox.MarkUnavailable(fmt.Errorf("devbox %s is %s (%s) while agentctl waited for it to be %s", w.id, d.Status, why, want))
		}
		if err := hosted.Sleep(ctx, w.p.poll); err != nil {
			return nil, fmt.Errorf("waiting for devbox %s to be %s (it is %s): %w", w.id, want, d.Status, err)
		}
	}
}

// Start implements sandbox.Sandbox: a suspended devbox is resumed, and
// its keep-alive timer reset either way.
func (w *Workspace) Start(ctx context.Context) error {
	d, err := w.c.Get(ctx, w.id)
	if err != nil {
		return err
	}
	switch d.Status {
	case StatusSuspended, "suspending":
		if d.Status == "suspending" {
			if _, err := w.await(ctx, StatusSuspended); err != nil {
				return err
			}
		}
		if _, err := w.c.Resume(ctx, w.id); err != nil {
			return err
		}
	case StatusShutdown, StatusFailure:
		return sandbox.MarkUnavailable(fmt.Errorf("devbox %s is %s: it cannot be started again", w.id, d.Status))
	}
	if _, err := w.await(ctx, StatusRunning); err != nil {
		return err
	}
	w.mu.Lock()
	w.extended = time.Time{}
	w.mu.Unlock()
	return w.keepAlive(ctx)
}

// Stop implements sandbox.Sandbox (on_exit = "stop"): the devbox is
// suspended, its disk kept, until Start resumes it.
func (w *Workspace) Stop(ctx context.Context) error {
	if _, err := w.c.Suspend(ctx, w.id); err != nil {
		return err
	}
	_, err := w.await(ctx, StatusSuspended)
	return err
}

// Delete implements sandbox.Sandbox: the devbox is shut down; one
// already gone is not an error.
func (w *Workspace) Delete(ctx context.Context) error {
	d, err := w.c.Get(ctx, w.id)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if d.Status == StatusShutdown {
		return nil
	}
	if _, err := w.c.Shutdown(ctx, w.id); err != nil && !IsNotFound(err) {
		return err
	}
	return nil
}

// Refresh implements sandbox.Sandbox.
func (w *Workspace) Refresh(ctx context.Context) (sandbox.Status, error) {
	d, err := w.c.Get(ctx, w.id)
	if IsNotFound(err) {
		return sandbox.StatusMissing, nil
	}
	if err != nil {
		return "", err
	}
	switch d.Status {
	case StatusShutdown, StatusFailure:
		return sandbox.StatusMissing, nil
	case StatusSuspended, "suspending":
		return sandbox.StatusStopped, nil
	}
	return sandbox.StatusRunning, nil
}

// keepAlive resets the keep-alive timer when a quarter of it has passed
// since it was last reset, so a devbox in use is never reaped while one
// agentctl abandoned is.
func (w *Workspace) keepAlive(ctx context.Context) error {
	ttl := w.st.timeout()
	w.mu.Lock()
	due := time.Since(w.extended) > ttl/4
	w.mu.Unlock()
	if !due {
		return nil
	}
	if err := w.c.KeepAlive(ctx, w.id); err != nil {
		if IsNotFound(err) {
			return sandbox.MarkUnavailable(err)
		}
		return err
	}
	w.mu.Lock()
	w.extended = time.Now()
	w.mu.Unlock()
	return nil
}

// PortURL implements sandbox.Sandbox: the devbox gets an open tunnel on
// first use, and Runloop serves port P at https://P-<key>.<domain>.
func (w *Workspace) PortURL(ctx context.Context, port int) (string, error) {
	if !slices.Contains(w.spec.Ports, port) {
		return "", fmt.Errorf("port %d is not exposed; add it to the sandbox's ports", port)
	}
	w.mu.Lock()
	t := w.tunnel
	w.mu.Unlock()
	if t == nil {
		var err error
		if t, err = w.c.EnableTunnel(ctx, w.id); err != nil {
			return "", err
		}
		w.mu.Lock()
		w.tunnel = t
		w.mu.Unlock()
	}
	return fmt.Sprintf("https://%d-%s.%s", port, t.TunnelKey, w.p.tunnelDomain), nil
}
