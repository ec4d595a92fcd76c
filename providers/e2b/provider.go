package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/agentctl/agentctl/providers/internal/hosted"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// Options configures the provider. Values left empty come from Environ
// (KEY=VALUE entries, normally os.Environ()): E2B_API_KEY, E2B_DOMAIN and
// E2B_API_URL. The key is held in memory only: never in state, messages
// or logs.
type Options struct {
	APIKey, Domain, APIURL string
	Environ                []string
	HTTPClient             *http.Client
	// TempDir is a writable directory inside sandboxes for transfer
	// archives (default /tmp).
	TempDir string
}

// Provider creates and reconnects to E2B sandboxes.
type Provider struct {
	client  *Client
	tempDir string
}

// New returns an E2B provider. Its errors do not name the provider: the
// caller prefixes the provider's address, as the engine does.
func New(opts Options) (*Provider, error) {
	pick := func(v, key string) string {
		if v != "" {
			return v
		}
		return registry.Getenv(opts.Environ, key)
	}
	c, err := NewClient(Config{APIKey: pick(opts.APIKey, "E2B_API_KEY"), Domain: pick(opts.Domain, "E2B_DOMAIN"),
		APIURL: pick(opts.APIURL, "E2B_API_URL"), HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, err
	}
	p := &Provider{client: c, tempDir: "/tmp"}
	if opts.TempDir != "" {
		p.tempDir = path.Clean(opts.TempDir)
	}
	return p, nil
}

// Client returns the API client.
func (p *Provider) Client() *Client { return p.client }

// Kind implements sandbox.Provider.
func (p *Provider) Kind() string { return "e2b" }

// Create implements sandbox.Provider: it removes what an interrupted
// create left for the same address, creates the sandbox from its
// template with agentctl's metadata and the time to live, and creates the
// workspace root and the manifest's accounts. Whatever fails after E2B
// created the sandbox kills it.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	st, err := settingsOf(spec)
	if err != nil {
		return nil, err
	}
	root, err := workspaceRoot(spec)
	if err != nil {
		return nil, err
	}
	template := st.template()
	if spec.Image != "" {
		// The engine restores from a whole-sandbox snapshot (Commit).
		if template, err = snapshotName(spec.Image); err != nil {
			return nil, fmt.Errorf("E2B creates sandboxes from templates, not images: %w", err)
		}
	}
	if err := p.removeLeftovers(ctx, spec); err != nil {
		return nil, err
	}
	params := CreateParams{Template: template, Timeout: st.timeout(), Metadata: sandbox.Labels(spec, nil)}
	if st != nil {
		params.Metadata = sandbox.Labels(spec, st.Metadata)
		params.EnvVars, params.AutoPause = st.Env, st.OnTimeout == "pause"
	}
	if spec.Network == "none" {
		params.AllowInternetAccess = new(bool)
	}
	s, err := p.client.Create(ctx, params, spec.Address)
	if err != nil {
		// A create that failed after E2B made the sandbox (a lost answer)
		// leaves one labelled with this address: remove it.
		return nil, hosted.FailedCreate(ctx, err, "sandbox", func(ctx context.Context) error {
			return p.removeLeftovers(ctx, spec)
		})
	}
	w := p.wrap(s, spec, st, root)
	if err := w.setup(ctx); err != nil {
		return nil, hosted.Discard(ctx, err, s.Kill, "killing the sandbox (id "+s.ID+")", "kill it in the E2B dashboard")
	}
	return w, nil
}

// setup creates the workspace root and the manifest's accounts.
func (w *Workspace) setup(ctx context.Context) error {
	if err := w.envd.MakeDir(ctx, w.root); err != nil {
		return fmt.Errorf("creating the workspace root %s: %w (the template's user must be able to create it: set root in the manifest to a directory below its home, such as %s)", w.root, err, DefaultRoot)
	}
	return w.createAccounts(ctx)
}

// removeLeftovers kills the sandboxes an interrupted create left behind:
// those whose metadata names this state's lineage and this address. The
// engine creates a sandbox only when its state records none alive for
// the address, so such a sandbox is a leftover, running and billed
// untracked.
func (p *Provider) removeLeftovers(ctx context.Context, spec sandbox.Spec) error {
	list := func(ctx context.Context) ([]*Sandbox, error) {
		old, err := p.client.List(ctx, map[string]string{sandbox.LabelManaged: "true", sandbox.LabelLineage: spec.Lineage, sandbox.LabelAddress: spec.Address})
		if err != nil {
			return nil, fmt.Errorf("looking for sandboxes an interrupted apply left behind: %w", err)
		}
		return old, nil
	}
	owner := func(s *Sandbox) (string, string) {
		return s.Metadata[sandbox.LabelLineage], s.Metadata[sandbox.LabelAddress]
	}
	remove := func(ctx context.Context, s *Sandbox) error {
		s.addr = spec.Address
		if err := s.Kill(ctx); err != nil {
			return fmt.Errorf("killing sandbox %s, left behind by an interrupted apply: %w", s.ID, err)
		}
		return nil
	}
	return sandbox.RemoveLeftovers(ctx, spec, list, owner, remove)
}

// Open implements sandbox.Provider: it finds the sandbox without resuming
// it. A sandbox E2B no longer knows (killed, or past its timeout) is
// sandbox.ErrNotFound.
func (p *Provider) Open(ctx context.Context, spec sandbox.Spec, ss sandbox.SessionState) (sandbox.Sandbox, error) {
	st, root, err := hosted.OpenArgs[Settings](ss, spec, "e2b", "sandbox", DefaultRoot)
	if err != nil {
		return nil, err
	}
	s, err := p.client.Get(ctx, ss.ID, spec.Address)
	if err != nil {
		return nil, err
	}
	return p.wrap(s, spec, st, root), nil
}

func workspaceRoot(spec sandbox.Spec) (string, error) {
	return hosted.WorkspaceRoot(spec.Root, DefaultRoot)
}

func (p *Provider) wrap(s *Sandbox, spec sandbox.Spec, st *Settings, root string) *Workspace {
	return &Workspace{p: p, s: s, envd: s.Envd(), spec: spec, st: st, root: root, extended: time.Now()}
}

// Workspace is an E2B sandbox behind the sandbox.Sandbox interface.
type Workspace struct {
	p    *Provider
	s    *Sandbox
	envd *Envd
	spec sandbox.Spec
	st   *Settings
	root string

	mu sync.Mutex
	// extended is when the time to live was last set.
	extended time.Time
}

var (
	_ sandbox.Sandbox        = (*Workspace)(nil)
	_ sandbox.ProcessStarter = (*Workspace)(nil)
)

// E2B returns the control plane's sandbox.
func (w *Workspace) E2B() *Sandbox { return w.s }

// ID implements sandbox.Sandbox.
func (w *Workspace) ID() string { return w.s.ID }

// Session implements sandbox.Sandbox; it holds no credentials (the envd
// access token is fetched again on open).
func (w *Workspace) Session() sandbox.SessionState {
	return sandbox.SessionState{Provider: "e2b", ID: w.s.ID}
}

// Start implements sandbox.Sandbox: a paused sandbox is resumed (connect),
// and the time to live is set to timeout from now either way.
func (w *Workspace) Start(ctx context.Context) error {
	if err := w.s.Connect(ctx, w.st.timeout()); err != nil {
		return err
	}
	w.mu.Lock()
	w.extended = time.Now()
	w.mu.Unlock()
	return nil
}

// Stop implements sandbox.Sandbox (on_exit = "stop"): the sandbox is
// paused, its memory and files kept, until Start resumes it.
func (w *Workspace) Stop(ctx context.Context) error { return w.s.Pause(ctx) }

// Delete implements sandbox.Sandbox: the sandbox is killed; one already
// gone is not an error.
func (w *Workspace) Delete(ctx context.Context) error { return w.s.Kill(ctx) }

// Refresh implements sandbox.Sandbox.
func (w *Workspace) Refresh(ctx context.Context) (sandbox.Status, error) {
	if err := w.s.Refresh(ctx); err != nil {
		if IsNotFound(err) {
			return sandbox.StatusMissing, nil
		}
		return "", err
	}
	if w.s.State == StatePaused {
		return sandbox.StatusStopped, nil
	}
	return sandbox.StatusRunning, nil
}

// keepAlive pushes the time to live back to timeout from now when a
// quarter of it has passed since it was last set, so a sandbox in use is
// never reaped while one agentctl abandoned is.
func (w *Workspace) keepAlive(ctx context.Context) error {
	ttl := w.st.timeout()
	w.mu.Lock()
	due := time.Since(w.extended) > ttl/4
	w.mu.Unlock()
	if !due {
		return nil
	}
	if err := w.s.SetTimeout(ctx, ttl); err != nil {
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

// PortURL implements sandbox.Sandbox: E2B serves every port of a sandbox
// at https://<port>-<id>.<domain>.
func (w *Workspace) PortURL(_ context.Context, port int) (string, error) {
	if !slices.Contains(w.spec.Ports, port) {
		return "", fmt.Errorf("port %d is not exposed; add it to the sandbox's ports", port)
	}
	return "https://" + HostOf(port, w.s.ID, w.s.Domain), nil
}

// unavailable marks an envd error from a sandbox that is paused or gone
// as sandbox.ErrUnavailable.
func unavailable(err error) error {
	if errors.Is(err, errUnreachable) {
		return sandbox.MarkUnavailable(err)
	}
	return err
}
