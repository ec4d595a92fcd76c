package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

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
	env := map[string]string{}
	for _, kv := range opts.Environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	pick := func(v, key string) string {
		if v != "" {
			return v
		}
		return env[key]
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

// Settings are the daytona sandbox settings (spec.Settings), decoded.
type Settings struct {
	Snapshot            string
	Env                 map[string]string
	Labels              map[string]string
	AutoStopInterval    *int
	AutoArchiveInterval *int
	AutoDeleteInterval  *int
	NetworkBlockAll     bool
	NetworkAllowList    string
	Public              bool
	CreateTimeout       time.Duration
	StartTimeout        time.Duration
	PreviewTTL          time.Duration
}

var settingKeys = []string{"snapshot", "env", "labels", "auto_stop_interval", "auto_archive_interval", "auto_delete_interval",
	"network_block_all", "network_allow_list", "public", "create_timeout", "start_timeout", "preview_url_ttl"}

// ParseSettings decodes and validates a sandbox's settings together with
// its image and resources. Config validation may call it at plan time.
func ParseSettings(spec sandbox.Spec) (Settings, error) {
	st := Settings{CreateTimeout: DefaultCreateTimeout, StartTimeout: DefaultStartTimeout, PreviewTTL: DefaultPreviewTTL}
	bad := func(key, want string, v any) error {
		return fmt.Errorf("daytona: %s: setting %s must be %s, got %v (%T)", spec.Address, key, want, v, v)
	}
	for k, v := range spec.Settings {
		if !slices.Contains(settingKeys, k) {
			return st, fmt.Errorf("daytona: %s: unknown setting %q; known settings: %s", spec.Address, k, strings.Join(settingKeys, ", "))
		}
		var err error
		switch k {
		case "snapshot":
			s, ok := v.(string)
			if !ok {
				return st, bad(k, "a string", v)
			}
			st.Snapshot = s
		case "network_allow_list":
			// A list of CIDRs (as the configuration gives it) or the API's
			// comma-separated string.
			cidrs, ok := toStringList(v)
			if !ok {
				return st, bad(k, "a list of CIDRs", v)
			}
			for _, c := range cidrs {
				if _, _, err := net.ParseCIDR(c); err != nil {
					return st, fmt.Errorf("daytona: %s: setting network_allow_list: %q is not a CIDR such as \"10.0.0.0/8\"", spec.Address, c)
				}
			}
			st.NetworkAllowList = strings.Join(cidrs, ",")
		case "env", "labels":
			m, ok := toStringMap(v)
			if !ok {
				return st, bad(k, "a map of strings", v)
			}
			if k == "env" {
				st.Env = m
			} else {
				st.Labels = m
			}
		case "auto_stop_interval", "auto_archive_interval", "auto_delete_interval":
			n, ok := toInt(v)
			if !ok {
				return st, bad(k, "a whole number of minutes", v)
			}
			if n < 0 && k != "auto_delete_interval" {
				return st, fmt.Errorf("daytona: %s: setting %s must not be negative (0 disables it)", spec.Address, k)
			}
			switch k {
			case "auto_stop_interval":
				st.AutoStopInterval = &n
			case "auto_archive_interval":
				st.AutoArchiveInterval = &n
			default:
				st.AutoDeleteInterval = &n
			}
		case "network_block_all", "public":
			b, ok := v.(bool)
			if !ok {
				return st, bad(k, "true or false", v)
			}
			if k == "public" {
				st.Public = b
			} else {
				st.NetworkBlockAll = b
			}
		case "create_timeout":
			st.CreateTimeout, err = toDuration(v)
		case "start_timeout":
			st.StartTimeout, err = toDuration(v)
		case "preview_url_ttl":
			st.PreviewTTL, err = toDuration(v)
		}
		if err != nil {
			return st, fmt.Errorf("daytona: %s: setting %s: %v; use a duration such as \"90s\" or \"5m\", or a number of seconds", spec.Address, k, err)
		}
	}
	if st.Snapshot != "" && spec.Image != "" {
		return st, fmt.Errorf("daytona: %s: both image %q and setting snapshot %q are set; a Daytona sandbox starts from one of them: remove one", spec.Address, spec.Image, st.Snapshot)
	}
	if st.Snapshot != "" && spec.Resources != (sandbox.Resources{}) {
		return st, fmt.Errorf("daytona: %s: resources cannot be combined with snapshot %q (Daytona fixes them per snapshot); remove resources, or use image instead of snapshot", spec.Address, st.Snapshot)
	}
	if st.Snapshot == "" && spec.Image == "" && spec.Resources != (sandbox.Resources{}) {
		return st, fmt.Errorf("daytona: %s: resources need an image (without one Daytona's default snapshot is used, whose resources are fixed); set image, or remove resources", spec.Address)
	}
	if spec.Resources.PIDs > 0 {
		return st, fmt.Errorf("daytona: %s: resources.pids is not supported by Daytona; remove it", spec.Address)
	}
	if spec.Network != "" && spec.Network != "none" && spec.Network != "bridge" && spec.Network != "host" {
		return st, fmt.Errorf("daytona: %s: network %q is not supported by Daytona; use network_block_all / network_allow_list settings", spec.Address, spec.Network)
	}
	if st.PreviewTTL < time.Second {
		return st, fmt.Errorf("daytona: %s: preview_url_ttl must be at least 1s", spec.Address)
	}
	for _, port := range spec.Ports {
		if port < 3000 || port > 9999 {
			return st, fmt.Errorf("daytona: %s: port %d cannot be previewed: Daytona preview URLs serve ports 3000-9999", spec.Address, port)
		}
	}
	return st, nil
}

func toStringMap(v any) (map[string]string, bool) {
	switch m := v.(type) {
	case map[string]string:
		return m, true
	case map[string]any:
		out := make(map[string]string, len(m))
		for k, x := range m {
			s, ok := x.(string)
			if !ok {
				return nil, false
			}
			out[k] = s
		}
		return out, true
	}
	return nil, false
}

// toStringList accepts a list of strings or one comma-separated string.
func toStringList(v any) ([]string, bool) {
	var items []string
	switch l := v.(type) {
	case string:
		items = strings.Split(l, ",")
	case []string:
		items = l
	case []any:
		for _, x := range l {
			s, ok := x.(string)
			if !ok {
				return nil, false
			}
			items = append(items, s)
		}
	default:
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, true
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		if n == math.Trunc(n) {
			return int(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	}
	return 0, false
}

func toDuration(v any) (time.Duration, error) {
	if d, ok := v.(time.Duration); ok {
		if d <= 0 {
			return 0, errors.New("must be positive")
		}
		return d, nil
	}
	if s, ok := v.(string); ok {
		if n, err := strconv.Atoi(s); err == nil {
			return time.Duration(n) * time.Second, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, err
		}
		if d <= 0 {
			return 0, errors.New("must be positive")
		}
		return d, nil
	}
	if n, ok := toInt(v); ok && n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	return 0, fmt.Errorf("invalid value %v", v)
}

// sessionData is SessionState.Data. It holds no credentials.
type sessionData struct {
	Name string `json:"name,omitempty"`
}

// Create implements sandbox.Provider: it creates the sandbox, waits for
// it to start and creates the workspace root.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	st, err := ParseSettings(spec)
	if err != nil {
		return nil, err
	}
	root, err := workspaceRoot(spec)
	if err != nil {
		return nil, err
	}
	labels := sandbox.Labels(spec, st.Labels)
	params := CreateParams{
		Snapshot: st.Snapshot, Image: spec.Image, Env: st.Env, Labels: labels, Public: st.Public,
		NetworkBlockAll:  st.NetworkBlockAll || (spec.Network == "none" && st.NetworkAllowList == ""),
		NetworkAllowList: st.NetworkAllowList, AutoStopInterval: st.AutoStopInterval,
		AutoArchiveInterval: st.AutoArchiveInterval, AutoDeleteInterval: st.AutoDeleteInterval,
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
	s, err := p.client.Create(ctx, params, spec.Address, st.CreateTimeout)
	if err != nil {
		if s != nil && s.ID != "" {
			// Do not leave a failed sandbox behind.
			cctx, cancel := sandbox.CleanupContext(ctx)
			_ = s.Delete(cctx)
			cancel()
		}
		return nil, err
	}
	if err := s.FileSystem.CreateFolder(ctx, root, "755"); err != nil {
		err = fmt.Errorf("creating the workspace root %s: %w%s", root, err, p.rootHint(ctx, s, root))
		// The sandbox is started but unusable, and the engine records
		// only sandboxes whose create succeeded: delete it rather than
		// leave it running, and billed, untracked.
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		if derr := s.Delete(cctx); derr != nil {
			return nil, fmt.Errorf("%w; deleting the sandbox (id %s) also failed: %v; delete it in the Daytona dashboard", err, s.ID, derr)
		}
		return nil, err
	}
	return p.wrap(s, spec, st, root), nil
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
	if ss.Provider != "" && ss.Provider != "daytona" {
		return nil, fmt.Errorf("session state belongs to provider %q", ss.Provider)
	}
	if ss.ID == "" {
		return nil, fmt.Errorf("session state has no sandbox id: %w", sandbox.ErrNotFound)
	}
	st, err := ParseSettings(spec)
	if err != nil {
		return nil, err
	}
	root, err := workspaceRoot(spec)
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
	root := spec.Root
	if root == "" {
		root = DefaultRoot
	}
	if !path.IsAbs(root) || path.Clean(root) == "/" {
		return "", fmt.Errorf("workspace root %q must be an absolute path below /", root)
	}
	return path.Clean(root), nil
}

func (p *Provider) wrap(s *Sandbox, spec sandbox.Spec, st Settings, root string) *Workspace {
	return &Workspace{p: p, s: s, spec: spec, st: st, root: root}
}

// Workspace is a Daytona sandbox behind the sandbox.Sandbox interface.
type Workspace struct {
	p    *Provider
	s    *Sandbox
	spec sandbox.Spec
	st   Settings
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
		return w.s.WaitForStart(ctx, w.st.StartTimeout)
	case StateStopping, StateArchiving, "pausing":
		// Let the transition finish before asking for a start.
		want := StateStopped
		if w.s.State == StateArchiving {
			want = StateArchived
		} else if w.s.State == "pausing" {
			want = StatePaused
		}
		if err := w.s.waitFor(ctx, "start sandbox", want, w.st.StartTimeout); err != nil {
			return err
		}
	}
	return w.s.Start(ctx, w.st.StartTimeout)
}

// Stop implements sandbox.Sandbox (on_exit = "stop").
func (w *Workspace) Stop(ctx context.Context) error {
	if err := w.s.RefreshData(ctx); err != nil {
		return err
	}
	return w.s.Stop(ctx, w.st.StartTimeout)
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
	return w.s.GetSignedPreviewLink(ctx, port, int(w.st.PreviewTTL/time.Second))
}
