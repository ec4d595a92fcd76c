// Package docker is the Docker sandbox provider: every sandbox is one
// container created through the Docker Engine API
// (github.com/moby/moby/client), labelled as agentctl's, kept alive by an
// idle command under docker's init, and driven through exec and the
// container archive API.
//
// Approach in short (docs/docker-provider.md has the details):
//
//   - Files go through the archive API (HEAD/GET/PUT /containers/ID/archive),
//     which works on stopped containers too. Every path is resolved one
//     component at a time with the archive stat call, which reports the
//     fully evaluated target of a symlink; a link that leaves the workspace
//     root is refused with sandbox.ErrPathEscape.
//   - Tar streams given to CopyIn go through hostfs.SanitizeTar before
//     they are sent (no absolute names, no "..", no hardlinks, devices,
//     FIFOs or sparse files, nothing beneath a symlink, modes sanitized;
//     symlinks keep their target) and every parent directory is sent as an explicit
//     directory member, so the daemon replaces an existing symlink instead
//     of writing through it.
//   - Exec timeouts kill the whole process tree: every exec carries a
//     random marker in its environment, and on timeout a second exec (a
//     shell script using only builtins, so it needs no fork) reads
//     /proc/*/environ, stops then kills every process holding the marker,
//     and repeats until none is left. This catches children that changed
//     their process group or session, which a process-group kill would
//     miss, and spares the processes of other execs. A fork bomb starves
//     that helper (and any exec) of CPU and pids: when it has not finished
//     within a few seconds, the container is restarted through the Engine
//     API, which kills every process in it from outside.
package docker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/go-connections/tlsconfig"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// Kind is the provider kind.
const Kind = "docker"

// Hardening defaults every container is created with
// (docs/docker-provider.md, "Hardening defaults").
const (
	// DefaultPIDs bounds the processes a container may have alive when
	// the resources block sets no pids limit, as the local provider does.
	DefaultPIDs = 1024
	// DefaultShmSizeMB is the size of the container's /dev/shm tmpfs.
	DefaultShmSizeMB = 64
)

// DefaultCapabilities are the only capabilities a container keeps (every
// other one is dropped): what a root user in a workspace needs to own,
// chmod and write files of any user (CHOWN, DAC_OVERRIDE, FOWNER,
// FSETID), signal processes of another user (KILL), switch users as
// package managers and su do (SETUID, SETGID) and listen on ports below
// 1024 (NET_BIND_SERVICE). Docker's default set also has AUDIT_WRITE,
// MKNOD, NET_RAW, SETFCAP, SETPCAP and SYS_CHROOT; they are dropped and
// can be added back with cap_add.
var DefaultCapabilities = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE", "SETGID", "SETUID"}

// Capabilities are the names cap_add accepts (capabilities(7), Linux 5.9).
var Capabilities = []string{
	"AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE",
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER",
	"KILL", "LEASE", "LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN",
	"NET_BIND_SERVICE", "NET_BROADCAST", "NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP",
	"SETUID", "SYS_ADMIN", "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT",
	"SYS_PTRACE", "SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "SYSLOG", "WAKE_ALARM",
}

// idleScript keeps the container alive. It works with busybox sh, dash
// and bash, and exits at once on SIGTERM so stop is fast.
const idleScript = `trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done`

// Options configure the provider.
type Options struct {
	// Host is the daemon address (unix:///var/run/docker.sock,
	// tcp://host:2376, ...). Empty: DOCKER_HOST from Environ, else the
	// local socket.
	Host string
	// Environ is where DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH
	// and DOCKER_API_VERSION are read from. Nil: the process environment.
	Environ []string
	// Progress, when set, receives one line per image pull progress
	// message.
	Progress func(line string)
	// StopTimeout is how long Stop waits before killing (default 10s).
	StopTimeout time.Duration
}

// Provider creates Docker sandboxes.
type Provider struct {
	cli  *client.Client
	opts Options
}

var _ sandbox.Provider = (*Provider)(nil)

// New connects to the Docker daemon and negotiates the API version (unless
// DOCKER_API_VERSION pins one). Its errors do not name the provider: the
// caller prefixes the provider's address (provider.docker), as the engine
// does.
func New(ctx context.Context, opts Options) (*Provider, error) {
	env := opts.Environ
	if env == nil {
		env = os.Environ()
	}
	getenv := func(k string) string { return registry.Getenv(env, k) }
	host := opts.Host
	if host == "" {
		host = getenv("DOCKER_HOST")
	}
	if host == "" {
		host = client.DefaultDockerHost
	}
	copts := []client.Opt{}
	if certPath := getenv("DOCKER_CERT_PATH"); certPath != "" {
		tc, err := tlsconfig.Client(tlsconfig.Options{
			CAFile:             filepath.Join(certPath, "ca.pem"),
			CertFile:           filepath.Join(certPath, "cert.pem"),
			KeyFile:            filepath.Join(certPath, "key.pem"),
			InsecureSkipVerify: getenv("DOCKER_TLS_VERIFY") == "",
			MinVersion:         tls.VersionTLS12,
		})
		if err != nil {
			return nil, fmt.Errorf("TLS material in DOCKER_CERT_PATH=%s (ca.pem, cert.pem, key.pem): %w", certPath, err)
		}
		copts = append(copts, client.WithHTTPClient(&http.Client{
			Transport:     &http.Transport{TLSClientConfig: tc},
			CheckRedirect: client.CheckRedirect,
		}))
	} else if getenv("DOCKER_TLS_VERIFY") != "" {
		return nil, errors.New("DOCKER_TLS_VERIFY is set but DOCKER_CERT_PATH is not; set DOCKER_CERT_PATH to the directory holding ca.pem, cert.pem and key.pem")
	}
	copts = append(copts, client.WithHost(host))
	if v := strings.TrimSpace(getenv("DOCKER_API_VERSION")); v != "" {
		copts = append(copts, client.WithAPIVersion(v))
	}
	cli, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", host, err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("cannot reach the Docker daemon at %s: %w; start Docker or set the provider's host (or DOCKER_HOST)", host, err)
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 10 * time.Second
	}
	return &Provider{cli: cli, opts: opts}, nil
}

// Kind returns "docker".
func (p *Provider) Kind() string { return Kind }

// Client exposes the underlying moby client (tests, diagnostics).
func (p *Provider) Client() *client.Client { return p.cli }

// APIVersion is the negotiated API version.
func (p *Provider) APIVersion() string { return p.cli.ClientVersion() }

// Close releases the client's connections.
func (p *Provider) Close() error { return p.cli.Close() }

// sessionData is SessionState.Data for a docker sandbox.
type sessionData struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// ImageID is the id of the image the container was created from; the
	// engine compares it with ImageID(spec.Image) to plan a replace.
	ImageID string `json:"image_id"`
	Root    string `json:"root"`
	User    string `json:"user,omitempty"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	// URLs maps exposed container ports to host URLs as of the last start.
	URLs   map[string]string `json:"urls,omitempty"`
	Commit bool              `json:"commit_snapshot,omitempty"`
	// Imported marks a container agentctl adopted (Import) rather than
	// created: it may lack agentctl's labels, which Docker cannot add to
	// an existing container.
	Imported bool `json:"imported,omitempty"`
}

// SessionData decodes the docker-specific part of a session state.
func SessionData(st sandbox.SessionState) (image, imageID string, urls map[string]string, err error) {
	var d sessionData
	if len(st.Data) > 0 {
		if err := json.Unmarshal(st.Data, &d); err != nil {
			return "", "", nil, fmt.Errorf("session data of %s: %w", st.ID, err)
		}
	}
	return d.Image, d.ImageID, d.URLs, nil
}

// ImageID returns the id of the local image ref ("" and an error wrapping
// sandbox.ErrNotFound when it is not present locally). The engine compares
// it with the image id in session state to decide on a replace.
func (p *Provider) ImageID(ctx context.Context, ref string) (string, error) {
	res, err := p.cli.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("image %q: %w", ref, sandbox.ErrNotFound)
		}
		return "", fmt.Errorf("inspecting image %q: %w", ref, err)
	}
	return res.ID, nil
}

var (
	_ sandbox.ImageRemover = (*Provider)(nil)
	_ sandbox.ImageLooker  = (*Provider)(nil)
	_ sandbox.Committer    = (*Sandbox)(nil)
)

// RemoveImage removes the local image ref (a snapshot image made by
// Sandbox.Commit) and the untagged parent images only it used. An image
// that is already gone is not an error; one still used by a container is.
func (p *Provider) RemoveImage(ctx context.Context, ref string) error {
	_, err := p.cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{PruneChildren: true})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("removing image %q: %w; remove the containers using it (docker ps -a --filter ancestor=%s) and try again", ref, err, ref)
	}
	return fmt.Errorf("removing image %q: %w", ref, err)
}

// ensureImage returns the image id, pulling the image when it is missing.
func (p *Provider) ensureImage(ctx context.Context, ref string) (string, error) {
	id, err := p.ImageID(ctx, ref)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, sandbox.ErrNotFound) {
		return "", err
	}
	pullErr := p.pull(ctx, ref)
	if pullErr == nil {
		if id, err = p.ImageID(ctx, ref); err == nil {
			return id, nil
		}
		pullErr = err
	}
	return "", fmt.Errorf("image %q is not present locally and could not be pulled: %v; build or load it (docker build -t %s ., docker load), or check the name and the registry's reachability", ref, pullErr, ref)
}

func (p *Provider) pull(ctx context.Context, ref string) error {
	resp, err := p.cli.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer resp.Close()
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return err
		}
		if msg.Error != nil {
			return errors.New(msg.Error.Message)
		}
		if p.opts.Progress != nil {
			line := strings.TrimSpace(strings.Join(nonEmpty(msg.ID, msg.Status), ": "))
			if msg.Progress != nil && msg.Progress.Total > 0 {
				line += fmt.Sprintf(" %d/%d", msg.Progress.Current, msg.Progress.Total)
			}
			if line != "" {
				p.opts.Progress(fmt.Sprintf("pull %s: %s", ref, line))
			}
		}
	}
	return nil
}

func nonEmpty(ss ...string) []string {
	out := ss[:0:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

var nameUnsafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-zA-Z0-9_.-]+`) })

func containerName(address string) string {
	base := strings.Trim(nameUnsafe().ReplaceAllString(address, "-"), "-.")
	if len(base) > 60 {
		base = base[:60]
	}
	if base == "" {
		base = "sandbox"
	}
	return "agentctl-" + base + "-" + randHex(4)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Create pulls the image if needed, creates and starts the container, and
// makes the workspace root (owned by the sandbox user). Its errors do not
// repeat the sandbox's address, which the engine names.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if spec.Image == "" {
		return nil, errors.New("no image; set image = \"...\" in the sandbox block")
	}
	if err := p.removeLeftovers(ctx, spec); err != nil {
		return nil, err
	}
	root := path.Clean("/" + spec.Root)
	if spec.Root == "" {
		root = "/workspace"
	}
	settings, ok := spec.Settings.(*SandboxSettings)
	if !ok && spec.Settings != nil {
		return nil, fmt.Errorf("sandbox settings are %T, not *docker.SandboxSettings", spec.Settings)
	}
	user, commit := settings.user(), settings.CommitSnapshot()
	caps, shmMB := settings.capabilities(), settings.shmSizeMB()
	if spec.Resources.DiskGB > 0 || spec.Resources.GPUs > 0 {
		return nil, errors.New("resources disk and gpus are not supported; remove them")
	}

	netMode := spec.Network
	if netMode == "" {
		netMode = "none"
	}
	if len(spec.Ports) > 0 && (netMode == "none" || netMode == "host") {
		return nil, fmt.Errorf("ports %v need a container network, but network is %q; set network = \"bridge\" (or a named network)", spec.Ports, netMode)
	}

	imageID, err := p.ensureImage(ctx, spec.Image)
	if err != nil {
		return nil, err
	}

	exposed := network.PortSet{}
	bindings := network.PortMap{}
	for _, port := range spec.Ports {
		cp, err := network.ParsePort(strconv.Itoa(port) + "/tcp")
		if err != nil {
			return nil, fmt.Errorf("port %d: %w", port, err)
		}
		exposed[cp] = struct{}{}
		// An empty host port lets the daemon pick a free one.
		bindings[cp] = []network.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1")}}
	}
	labels := sandbox.Labels(spec, nil)
	init := true
	pids := spec.Resources.PIDs
	if pids <= 0 {
		pids = DefaultPIDs
	}
	hc := &container.HostConfig{
		NetworkMode:  container.NetworkMode(netMode),
		PortBindings: bindings,
		Init:         &init,
		// Hardening defaults: setuid binaries and file capabilities
		// grant nothing, only DefaultCapabilities (plus cap_add) are
		// kept, and /dev/shm and the process count are bounded.
		SecurityOpt: []string{"no-new-privileges"},
		CapDrop:     []string{"ALL"},
		CapAdd:      append(slices.Clone(DefaultCapabilities), caps...),
		ShmSize:     shmMB << 20,
		// Storage mounts made on this machine, bound in as they are: no
		// device, capability or privilege is added to the container.
		Mounts: storageMounts(root, spec.Mounts),
	}
	hc.Resources.NanoCPUs = int64(spec.Resources.CPUs * 1e9)
	hc.Resources.Memory = spec.Resources.MemoryMB << 20
	hc.Resources.PidsLimit = &pids
	name := containerName(spec.Address)
	cfg := &container.Config{
		Image:        spec.Image,
		Entrypoint:   []string{"/bin/sh", "-c", idleScript},
		Cmd:          []string{},
		WorkingDir:   root,
		User:         user,
		Labels:       labels,
		ExposedPorts: exposed,
	}
	created, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     cfg,
		HostConfig: hc,
		Name:       name,
	})
	if err != nil {
		return nil, fmt.Errorf("creating a container from %q: %w", spec.Image, err)
	}
	s := &Sandbox{p: p, id: created.ID, d: sessionData{
		Name: name, Image: spec.Image, ImageID: imageID, Root: root, User: user, Commit: commit,
	}, accounts: spec.Accounts}
	fail := func(err error) (sandbox.Sandbox, error) {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		_ = s.Delete(cctx)
		return nil, err
	}
	if s.d.UID, s.d.GID, err = s.lookupUser(ctx, user); err != nil {
		return fail(err)
	}
	if _, err := p.cli.ContainerStart(ctx, s.id, client.ContainerStartOptions{}); err != nil {
		return fail(s.wrap(ctx, "start", err))
	}
	if len(spec.Ports) > 0 {
		if err := s.refreshURLs(ctx); err != nil {
			return fail(err)
		}
	}
	// Docker creates the working directory (owned by root) when it starts
	// the container; only another owner needs fixing.
	if s.d.UID != 0 || s.d.GID != 0 {
		if err := s.ensureRoot(ctx); err != nil {
			return fail(err)
		}
	}
	if err := s.createAccounts(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

// createAccounts creates the manifest's users and groups with the
// image's own tools, as uid 0 (sandbox.AccountsScript).
func (s *Sandbox) createAccounts(ctx context.Context) error {
	if s.accounts.Empty() {
		return nil
	}
	argv := append([]string{"/bin/sh", "-c", sandbox.AccountsScript, "sh"}, sandbox.AccountsArgs(s.accounts, s.d.Root)...)
	_, stderr, code, err := s.run(ctx, "0", argv, nil)
	if err != nil {
		return fmt.Errorf("creating the manifest's users and groups: %w", err)
	}
	if code != 0 {
		return sandbox.AccountsError(s.d.Image, code, string(stderr))
	}
	return nil
}

// Open reconnects to the container named by st without starting it.
func (p *Provider) Open(ctx context.Context, spec sandbox.Spec, st sandbox.SessionState) (sandbox.Sandbox, error) {
	if st.Provider != "" && st.Provider != Kind {
		return nil, fmt.Errorf("session state belongs to provider %q", st.Provider)
	}
	var d sessionData
	if len(st.Data) > 0 {
		if err := json.Unmarshal(st.Data, &d); err != nil {
			return nil, fmt.Errorf("session data: %w", err)
		}
	}
	if st.ID == "" {
		return nil, fmt.Errorf("session state has no container id: %w", sandbox.ErrNotFound)
	}
	res, err := p.cli.ContainerInspect(ctx, st.ID, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("container %s: %w", short(st.ID), sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("inspecting container %s: %w", short(st.ID), err)
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[sandbox.LabelManaged] != "true" && !d.Imported {
		return nil, fmt.Errorf("container %s is not managed by agentctl (no %s label); refusing to use it", short(st.ID), sandbox.LabelManaged)
	}
	if d.Root == "" {
		d.Root = c.Config.WorkingDir
		if d.Root == "" {
			d.Root = path.Clean("/" + spec.Root)
		}
	}
	if d.Image == "" {
		d.Image = c.Config.Image
	}
	if d.ImageID == "" {
		d.ImageID = c.Image
	}
	if d.Name == "" {
		d.Name = strings.TrimPrefix(c.Name, "/")
	}
	return &Sandbox{p: p, id: c.ID, d: d, accounts: spec.Accounts}, nil
}

// Managed is one container carrying agentctl's labels.
type Managed struct {
	ID      string
	Name    string
	Address string
	Lineage string
	State   string
}

// ListManaged lists every container (running or not) labelled as
// agentctl's; with a non-empty lineage, only that state lineage's.
func (p *Provider) ListManaged(ctx context.Context, lineage string) ([]Managed, error) {
	f := client.Filters{}.Add("label", sandbox.LabelManaged+"=true")
	if lineage != "" {
		f = f.Add("label", sandbox.LabelLineage+"="+lineage)
	}
	res, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing agentctl's containers: %w", err)
	}
	out := make([]Managed, 0, len(res.Items))
	for _, c := range res.Items {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Managed{
			ID: c.ID, Name: name, State: string(c.State),
			Address: c.Labels[sandbox.LabelAddress], Lineage: c.Labels[sandbox.LabelLineage],
		})
	}
	return out, nil
}

// removeLeftovers removes containers labelled with spec's lineage and
// address: ones whose creation an earlier, killed agentctl never recorded
// in the state (see sandbox.RemoveLeftovers).
func (p *Provider) removeLeftovers(ctx context.Context, spec sandbox.Spec) error {
	list := func(ctx context.Context) ([]Managed, error) { return p.ListManaged(ctx, spec.Lineage) }
	owner := func(m Managed) (lineage, address string) { return m.Lineage, m.Address }
	remove := func(ctx context.Context, m Managed) error {
		if _, err := p.cli.ContainerRemove(ctx, m.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("removing leftover container %s of an interrupted create: %w", short(m.ID), err)
		}
		return nil
	}
	return sandbox.RemoveLeftovers(ctx, spec, list, owner, remove)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// readAll reads at most limit bytes from r and reports whether there was more.
func readAll(r io.Reader, limit int64) ([]byte, bool, error) {
	if limit <= 0 {
		b, err := io.ReadAll(r)
		return b, false, err
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > limit {
		return b[:limit], true, nil
	}
	return b, false, nil
}
