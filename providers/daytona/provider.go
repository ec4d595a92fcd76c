package daytona

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/internal/hosted"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// Defaults.
const (
	// DefaultRoot is the workspace root when the manifest sets none. The
	// default snapshot runs as the user daytona, who cannot create
	// /workspace (every such create fails with "permission denied"); its
	// home is /home/daytona, and Daytona's own guides work in
	// /home/daytona/workspace. A sandbox running as root can use it too.
	DefaultRoot          = "/home/daytona/workspace"
	DefaultCreateTimeout = 5 * time.Minute
	DefaultStartTimeout  = 2 * time.Minute
	// DefaultShortExec is the longest timeout a command may have and still
	// run through process/execute (one request held open at most this
	// long). Commands without a timeout, with a longer one, or with stdin
	// larger than fits the command line run in a session with an
	// asynchronous command and polling instead, so they may run for hours.
	DefaultShortExec = 60 * time.Second
	// DefaultPreviewTTL is how long a signed preview URL stays valid.
	DefaultPreviewTTL = time.Hour
)

// Options configures the provider. Credentials left empty are read from
// Environ (KEY=VALUE entries, normally os.Environ()): DAYTONA_API_KEY,
// DAYTONA_JWT_TOKEN, DAYTONA_ORGANIZATION_ID, DAYTONA_API_URL (default
// https://app.daytona.io/api) and DAYTONA_TARGET. Credentials are held in
// memory only: never in session state, messages or logs.
type Options struct {
	APIKey, JWTToken, OrganizationID, APIURL, Target string
	Environ                                          []string
	HTTPClient                                       *http.Client
	// PollInterval is the first interval of state and command polling
	// (default 100ms, growing as the SDK's does).
	PollInterval time.Duration
	// ShortExec overrides DefaultShortExec.
	ShortExec time.Duration
	// TempDir is a writable directory inside sandboxes for transfer
	// archives (default /tmp).
	TempDir string
}

// Provider creates and reconnects to Daytona sandboxes.
type Provider struct {
	client    *Client
	shortExec time.Duration
	tempDir   string
	poll      time.Duration
}

// New returns a Daytona provider. Its errors do not name the provider:
// the caller prefixes the provider's address (provider.daytona), as the
// engine does.
func New(opts Options) (*Provider, error) {
	pick := func(v, key string) string {
		if v != "" {
			return v
		}
		return registry.Getenv(opts.Environ, key)
	}
	cfg := Config{
		APIKey:         pick(opts.APIKey, "DAYTONA_API_KEY"),
		JWTToken:       pick(opts.JWTToken, "DAYTONA_JWT_TOKEN"),
		OrganizationID: pick(opts.OrganizationID, "DAYTONA_ORGANIZATION_ID"),
		APIURL:         pick(opts.APIURL, "DAYTONA_API_URL"),
		Target:         pick(opts.Target, "DAYTONA_TARGET"),
		HTTPClient:     opts.HTTPClient,
	}
	c, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	p := &Provider{client: c, shortExec: DefaultShortExec, tempDir: "/tmp", poll: c.pollInterval}
	if opts.PollInterval > 0 {
		c.pollInterval = opts.PollInterval
		p.poll = opts.PollInterval
	}
	if opts.ShortExec > 0 {
		p.shortExec = opts.ShortExec
	}
	if opts.TempDir != "" {
		p.tempDir = path.Clean(opts.TempDir)
	}
	return p, nil
}

// Client returns the underlying REST client.
func (p *Provider) Client() *Client { return p.client }

// Kind implements sandbox.Provider.
func (p *Provider) Kind() string { return "daytona" }

// sessionData is SessionState.Data. It holds no credentials.
type sessionData struct {
	Name string `json:"name,omitempty"`
}

// Lacks implements sandbox.CapabilityLacker. A timeout or a cancellation
// kills the command's process group (timeout(1) in the sandbox, or its
// session deleted); a process the command started in a session of its
// own (setsid) is not in the group and survives.
func (p *Provider) Lacks() map[sandbox.Capability]string {
	return map[sandbox.Capability]string{
		sandbox.CapabilitySessionKill: "a Daytona command is killed by its process group (timeout(1), or its session deleted), which a process in a session of its own (setsid) has left",
	}
}

var _ sandbox.CapabilityLacker = (*Provider)(nil)

// Create implements sandbox.Provider: it creates the sandbox, waits for
// it to start and creates the workspace root.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if len(spec.Mounts) > 0 {
		return nil, fmt.Errorf("storage mounts cannot be made in a Daytona sandbox (docs/mounts.md)")
	}
	st, err := settingsOf(spec)
	if err != nil {
		return nil, err
	}
	root, err := workspaceRoot(spec)
	if err != nil {
		return nil, err
	}
	var labels0 map[string]string
	if st != nil {
		labels0 = st.Labels
	}
	labels := sandbox.Labels(spec, labels0)
	params := CreateParams{Snapshot: st.snapshot(), Image: spec.Image, Labels: labels,
		NetworkBlockAll: spec.Network == "none" && st.allowList() == "", NetworkAllowList: st.allowList()}
	if st != nil {
		params.Env, params.Public = st.Env, flag(st.Public)
		params.NetworkBlockAll = params.NetworkBlockAll || flag(st.NetworkBlockAll)
		params.AutoStopInterval, params.AutoArchiveInterval, params.AutoDeleteInterval = st.AutoStopInterval, st.AutoArchiveInterval, st.AutoDeleteInterval
	}
	if spec.Image != "" {
		r := spec.Resources
		params.CPU = int(math.Ceil(r.CPUs))
		params.Memory = int((r.MemoryMB + 1023) / 1024)
		params.Disk = int(r.DiskGB)
		params.GPU = int(r.GPUs)
	}
	if err := p.removeLeftovers(ctx, spec); err != nil {
		return nil, err
	}
	s, err := p.client.Create(ctx, params, spec.Address, st.createTimeout())
	if err != nil {
		if s != nil && s.ID != "" {
			// Do not leave a failed sandbox behind, and say so when it
			// could not be deleted.
			return nil, hosted.Discard(ctx, err, s.Delete, "deleting the sandbox (id "+s.ID+")", "delete it in the Daytona dashboard")
		}
		return nil, err
	}
	if err := s.FileSystem.CreateFolder(ctx, root, "755"); err != nil {
		err = fmt.Errorf("creating the workspace root %s: %w%s", root, err, p.rootHint(ctx, s, root))
		// The sandbox is started but unusable, and the engine records
		// only sandboxes whose create succeeded: delete it rather than
		// leave it running, and billed, untracked.
		return nil, hosted.Discard(ctx, err, s.Delete, "deleting the sandbox (id "+s.ID+")", "delete it in the Daytona dashboard")
	}
	w := p.wrap(s, spec, st, root)
	if err := w.createAccounts(ctx); err != nil {
		return nil, hosted.Discard(ctx, err, s.Delete, "deleting the sandbox (id "+s.ID+")", "delete it in the Daytona dashboard")
	}
	return w, nil
}

// rootHint says where the sandbox's user may create the workspace root,
// from the toolbox's user-home-dir, when root is not below it ("" when it
// is, or when the home directory cannot be learnt).
func (p *Provider) rootHint(ctx context.Context, s *Sandbox, root string) string {
	home, err := s.UserHomeDir(ctx)
	if err != nil || home == "" || home == "/" {
		return ""
	}
	if root == home || strings.HasPrefix(root, strings.TrimSuffix(home, "/")+"/") {
		return ""
	}
	return fmt.Sprintf(" (the sandbox's user has home directory %s and may lack the permission to create %s: set root = %q in the manifest)", home, root, path.Join(home, "workspace"))
}

// removeLeftovers deletes the sandboxes an interrupted create left
// behind: those labelled with this state's lineage and this address. The
// engine creates a sandbox only when its state records none alive for the
// address, so such a sandbox was created by an apply that died (kill -9,
// power loss) before it could record the id; left alone it would run,
// and be billed, untracked.
func (p *Provider) removeLeftovers(ctx context.Context, spec sandbox.Spec) error {
	list := func(ctx context.Context) ([]*Sandbox, error) {
		old, err := p.client.List(ctx, map[string]string{sandbox.LabelManaged: "true", sandbox.LabelLineage: spec.Lineage, sandbox.LabelAddress: spec.Address})
		if err != nil {
			return nil, fmt.Errorf("looking for sandboxes an interrupted apply left behind: %w", err)
		}
		return old, nil
	}
	owner := func(s *Sandbox) (lineage, address string) {
		if s.State == StateDestroyed || s.State == StateDestroying {
			return "", ""
		}
		return s.Labels[sandbox.LabelLineage], s.Labels[sandbox.LabelAddress]
	}
	remove := func(ctx context.Context, s *Sandbox) error {
		s.SetAddress(spec.Address)
		if err := s.Delete(ctx); err != nil {
			return fmt.Errorf("deleting sandbox %s, left behind by an interrupted apply: %w", s.ID, err)
		}
		return nil
	}
	return sandbox.RemoveLeftovers(ctx, spec, list, owner, remove)
}

// Open implements sandbox.Provider: it reconnects to the sandbox in st
// without starting it. A sandbox Daytona no longer knows (or that is
// being destroyed) is reported as sandbox.ErrNotFound.
func (p *Provider) Open(ctx context.Context, spec sandbox.Spec, ss sandbox.SessionState) (sandbox.Sandbox, error) {
	st, root, err := hosted.OpenArgs[Settings](ss, spec, "daytona", "sandbox", DefaultRoot)
	if err != nil {
		return nil, err
	}
	s, err := p.client.Get(ctx, ss.ID, spec.Address)
	if err != nil {
		return nil, err
	}
	if s.State == StateDestroyed || s.State == StateDestroying {
		return nil, fmt.Errorf("sandbox %s is %s: %w", s.ID, s.State, sandbox.ErrNotFound)
	}
	return p.wrap(s, spec, st, root), nil
}

func workspaceRoot(spec sandbox.Spec) (string, error) {
	return hosted.WorkspaceRoot(spec.Root, DefaultRoot)
}

func (p *Provider) wrap(s *Sandbox, spec sandbox.Spec, st *Settings, root string) *Workspace {
	return &Workspace{p: p, s: s, spec: spec, st: st, root: root}
}

// Workspace is a Daytona sandbox behind the sandbox.Sandbox interface.
type Workspace struct {
	p    *Provider
	s    *Sandbox
	spec sandbox.Spec
	st   *Settings
	root string
}

var _ sandbox.Sandbox = (*Workspace)(nil)

// Daytona returns the underlying client sandbox.
func (w *Workspace) Daytona() *Sandbox { return w.s }

// ID implements sandbox.Sandbox.
func (w *Workspace) ID() string { return w.s.ID }

// Session implements sandbox.Sandbox.
func (w *Workspace) Session() sandbox.SessionState {
	b, _ := json.Marshal(sessionData{Name: w.s.Name})
	return sandbox.SessionState{Provider: "daytona", ID: w.s.ID, Data: b}
}

// Start implements sandbox.Sandbox: a stopped, archived or paused
// sandbox is started and waited for (start_timeout).
func (w *Workspace) Start(ctx context.Context) error {
	if err := w.s.RefreshData(ctx); err != nil {
		return err
	}
	switch w.s.State {
	case StateStarted:
		return nil
	case StateError, StateBuildFailed:
		return w.s.failed("start sandbox")
	case StateStarting, StateCreating, StatePendingBuild, "restoring", "pulling_snapshot", "building_snapshot", "resuming":
		return w.s.WaitForStart(ctx, w.st.startTimeout())
	case StateStopping, StateArchiving, "pausing":
		// Let the transition finish before asking for a start.
		want := StateStopped
		if w.s.State == StateArchiving {
			want = StateArchived
		} else if w.s.State == "pausing" {
			want = StatePaused
		}
		if err := w.s.waitFor(ctx, "start sandbox", want, w.st.startTimeout()); err != nil {
			return err
		}
	}
	return w.s.Start(ctx, w.st.startTimeout())
}

// Stop implements sandbox.Sandbox (on_exit = "stop").
func (w *Workspace) Stop(ctx context.Context) error {
	if err := w.s.RefreshData(ctx); err != nil {
		return err
	}
	return w.s.Stop(ctx, w.st.startTimeout())
}

// Delete implements sandbox.Sandbox; a missing sandbox is not an error.
func (w *Workspace) Delete(ctx context.Context) error { return w.s.Delete(ctx) }

// Refresh implements sandbox.Sandbox.
func (w *Workspace) Refresh(ctx context.Context) (sandbox.Status, error) {
	if err := w.s.RefreshData(ctx); err != nil {
		if IsNotFound(err) {
			return sandbox.StatusMissing, nil
		}
		return "", err
	}
	switch w.s.State {
	case StateDestroyed, StateDestroying:
		return sandbox.StatusMissing, nil
	case StateStarted, StateStarting, StateCreating, StatePendingBuild, "restoring", "pulling_snapshot", "building_snapshot", "resizing", "snapshotting", "forking", "resuming":
		return sandbox.StatusRunning, nil
	default:
		return sandbox.StatusStopped, nil
	}
}

// PortURL implements sandbox.Sandbox: a signed preview URL valid for
// preview_url_ttl (default 1h). The URL carries an access token: it must
// not be logged.
func (w *Workspace) PortURL(ctx context.Context, port int) (string, error) {
	l, err := w.SignedPortURL(ctx, port)
	if err != nil {
		return "", err
	}
	return l.URL, nil
}

// SignedPortURL is PortURL with the link's expiry.
func (w *Workspace) SignedPortURL(ctx context.Context, port int) (*SignedPreviewLink, error) {
	if !slices.Contains(w.spec.Ports, port) {
		return nil, fmt.Errorf("port %d is not exposed; add it to the sandbox's ports", port)
	}
	return w.s.GetSignedPreviewLink(ctx, port, int(w.st.previewTTL()/time.Second))
}
