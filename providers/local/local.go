//go:build unix

// Package local is the sandbox provider that keeps each workspace in a
// directory under the state directory and runs commands on this machine.
//
// With isolation "namespaces" (the default) every command runs in fresh
// user, mount, PID, network, IPC and UTS namespaces, set up by a re-exec of
// the agentctl binary itself (see MaybeRunInit). With isolation "none"
// commands run directly on the host in the workspace directory: an
// explicit, unsafe opt-out. docs/local-provider.md describes the model.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/agentctl/agentctl/providers/local/internal/nsinit"
	"github.com/agentctl/agentctl/sandbox"
)

// Isolation modes.
const (
	IsolationNamespaces = "namespaces"
	IsolationNone       = "none"
)

// DefaultHostID is the host uid and gid a namespaced sandbox runs as when
// agentctl itself runs as root: a dedicated, otherwise unused id, so host
// file permissions apply to the sandbox as to an unknown user.
const DefaultHostID = 2100000000

// DefaultPIDs bounds the number of processes one command may have alive
// (RLIMIT_NPROC inside the sandbox's user namespace) when the spec sets no
// limit, so a fork bomb stops at the limit instead of exhausting the host.
const DefaultPIDs = 1024

// ShmSizeMB is the size of a namespaced sandbox's private /dev/shm tmpfs
// (without a size, a tmpfs may grow to half of the host's memory); the
// number of its files is bounded too (nsinit.ShmInodes).
const ShmSizeMB = nsinit.ShmSizeMB

// Options configure the provider (the HCL `provider "local"` block).
type Options struct {
	// Isolation is "namespaces" (the default) or "none" (no isolation:
	// commands run on the host as the agentctl user; unsafe).
	Isolation string
	// Executable is the agentctl binary re-executed to set up the
	// namespaces; default os.Executable(). Its main must call MaybeRunInit
	// first.
	Executable string
	// HostID is the host uid/gid sandboxed commands run as when agentctl
	// runs as root; default DefaultHostID. Ignored when not root: the
	// sandbox then runs as the invoking user.
	HostID int
	// ReadOnlyPaths are extra host directories (absolute) made visible
	// read-only at the same path inside namespaced sandboxes, e.g. /opt.
	ReadOnlyPaths []string
	// Host is the name of this machine, recorded in the state with each
	// sandbox made here, so that the agentctl of another machine sharing
	// the state through a backend tells the sandbox is not its own;
	// default os.Hostname().
	Host string
}

// Provider creates local sandboxes. It is safe for concurrent use.
type Provider struct {
	opts Options
}

// New returns a local provider.
func New(opts Options) *Provider {
	if opts.Isolation == "" {
		opts.Isolation = IsolationNamespaces
	}
	if opts.HostID <= 0 {
		opts.HostID = DefaultHostID
	}
	if opts.Host == "" {
		// Without a host name the sandboxes are told apart by their
		// directory only.
		opts.Host, _ = os.Hostname()
	}
	return &Provider{opts: opts}
}

// Kind is "local".
func (p *Provider) Kind() string { return "local" }

var _ sandbox.Provider = (*Provider)(nil)

// sessionData is what state.json keeps in SessionState.Data. Dir and
// Host say which working directory of which machine owns the sandbox
// (Host is "" in states written before it was recorded).
type sessionData struct {
	Dir       string `json:"dir"`
	Host      string `json:"host,omitempty"`
	Isolation string `json:"isolation"`
	Status    string `json:"status"`
}

// markerName is the file next to the workspace directory that proves a
// directory was created by this provider (Delete refuses anything else).
const markerName = "agentctl-sandbox.json"

type marker struct {
	Address string `json:"address"`
	Lineage string `json:"lineage"`
	Created string `json:"created"`
}

func (p *Provider) check(spec *sandbox.Spec) error {
	switch p.opts.Isolation {
	case IsolationNamespaces, IsolationNone:
	default:
		return fmt.Errorf("unknown isolation %q: use %q (the default) or %q", p.opts.Isolation, IsolationNamespaces, IsolationNone)
	}
	if spec.StateDir == "" {
		return errors.New("the sandbox spec has no state directory to keep the workspace in")
	}
	if spec.Root == "" {
		spec.Root = "/workspace"
	}
	if err := checkRoot(spec.Root); err != nil {
		return err
	}
	if err := CheckResources(p.opts.Isolation, spec.Resources); err != nil {
		return err
	}
	if err := checkAccounts(p.opts.Isolation, spec.Accounts, false); err != nil {
		return err
	}
	switch spec.Network {
	case "", "none", "host":
	default:
		return fmt.Errorf("network %q is not supported: use \"none\" (the default) or \"host\"", spec.Network)
	}
	if p.opts.Isolation == IsolationNamespaces {
		for _, ro := range p.opts.ReadOnlyPaths {
			if !path.IsAbs(ro) || path.Clean(ro) != ro || ro == "/" {
				return fmt.Errorf("read-only path %q must be a clean absolute path other than /", ro)
			}
			for _, r := range []string{"/tmp", "/proc", "/dev"} {
				if ro == r || strings.HasPrefix(ro, r+"/") {
					return fmt.Errorf("read-only path %q cannot be shared: %s inside the sandbox is its own", ro, r)
				}
			}
		}
	}
	return nil
}

// CheckResources reports whether a local sandbox's resources can be
// enforced on this machine with the given isolation; configuration
// validation calls it too, so that a limit that would not hold is an
// error at its attribute, never a setting silently ignored. pids is
// enforced by the namespaced init (RLIMIT_NPROC); memory and cpus by a
// cgroup of the sandbox's own (cgroup_linux.go); disk and gpus never.
func CheckResources(isolation string, r sandbox.Resources) error {
	if r.DiskGB > 0 || r.GPUs > 0 {
		return errors.New("resources disk and gpus are not enforced: remove them or use the docker provider")
	}
	if isolation == IsolationNone {
		var set []string
		for _, x := range []struct {
			name string
			on   bool
		}{{"cpus", r.CPUs > 0}, {"memory", r.MemoryMB > 0}, {"pids", r.PIDs > 0}} {
			if x.on {
				set = append(set, x.name)
			}
		}
		if len(set) > 0 {
			verb := "are"
			if len(set) == 1 {
				verb = "is"
			}
			return fmt.Errorf("resources %s %s not enforced with isolation %q (commands run directly on this machine): remove them or use isolation %q", strings.Join(set, " and "), verb, IsolationNone, IsolationNamespaces)
		}
	}
	if r.CPUs > 0 || r.MemoryMB > 0 {
		if err := cgroupCheck(r); err != nil {
			return fmt.Errorf("resources memory and cpus cannot be enforced on this machine: %w; remove them or use the docker provider", err)
		}
	}
	return nil
}

// CheckAccounts reports whether a local sandbox with isolation can have
// the manifest's users and groups: only namespaced sandboxes on Linux,
// of an agentctl running as root, or as an ordinary user with
// subordinate ids, which the agentctl command then maps through a user
// namespace of its own (docs/local-provider.md, "Users and groups").
// Configuration validation calls it.
func CheckAccounts(isolation string, a sandbox.Accounts) error {
	return checkAccounts(isolation, a, true)
}

// checkAccounts is CheckAccounts; without later, this process must be
// able to map the ids itself (it creates the sandbox).
func checkAccounts(isolation string, a sandbox.Accounts, later bool) error {
	if a.Empty() {
		return nil
	}
	if isolation == IsolationNone {
		return fmt.Errorf("the manifest declares users and groups, but isolation %q runs every command directly on this machine as the agentctl user and cannot switch users: use isolation %q, or provider.docker", IsolationNone, IsolationNamespaces)
	}
	if runtime.GOOS != "linux" {
		return errors.New("the manifest declares users and groups, which a local sandbox has only on Linux: use provider.docker")
	}
	return accountsMappable(a, later)
}

// NeedsUserNamespace reports whether a sandbox of isolation with
// accounts needs the agentctl command to run in a user namespace of its
// own: an ordinary user's namespaced sandbox with manifest users.
func NeedsUserNamespace(isolation string, a sandbox.Accounts) bool {
	return isolation == IsolationNamespaces && !a.Empty() && runtime.GOOS == "linux" && os.Geteuid() != 0
}

// reservedRoots cannot hold the workspace inside a namespaced sandbox.
var reservedRoots = []string{"/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev", "/tmp", "/sys"}

func checkRoot(root string) error {
	if !path.IsAbs(root) || path.Clean(root) != root {
		return fmt.Errorf("workspace root %q must be a clean absolute path such as /workspace", root)
	}
	for _, r := range reservedRoots {
		if root == r || (r != "/" && strings.HasPrefix(root, r+"/")) {
			return fmt.Errorf("workspace root %q is a system directory inside the sandbox: choose another, such as /workspace", root)
		}
	}
	return nil
}

var unsafeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_.-]+`) })

// Create makes a new workspace directory under spec.StateDir.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := p.check(&spec); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(spec.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	name := strings.Trim(unsafeName().ReplaceAllString(spec.Address, "-"), "-.")
	if len(name) > 60 {
		name = name[:60]
	}
	if name == "" {
		name = "sandbox"
	}
	if err := removeLeftovers(ctx, spec, name); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(spec.StateDir, name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating the sandbox directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("preparing the sandbox directory: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	mk, _ := json.Marshal(marker{Address: spec.Address, Lineage: spec.Lineage, Created: time.Now().UTC().Format(time.RFC3339)})
	if err := os.WriteFile(filepath.Join(dir, markerName), mk, 0o600); err != nil {
		cleanup()
		return nil, fmt.Errorf("preparing the sandbox directory: %w", err)
	}
	for _, d := range []string{"workspace", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			cleanup()
			return nil, fmt.Errorf("preparing the sandbox directory: %w", err)
		}
	}
	// The private /tmp is shared by the commands of one sandbox only.
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o777|os.ModeSticky); err != nil {
		cleanup()
		return nil, fmt.Errorf("preparing the sandbox directory: %w", err)
	}
	if !spec.Accounts.Empty() {
		// The manifest's users may create files in the workspace root, as
		// in /tmp; the sandbox directory (0700) keeps host users out.
		if err := os.Chmod(filepath.Join(dir, "workspace"), 0o777|os.ModeSticky); err != nil {
			cleanup()
			return nil, fmt.Errorf("preparing the sandbox directory: %w", err)
		}
	}
	if err := bindMounts(filepath.Join(dir, "workspace"), spec.Mounts); err != nil {
		unbindAll(dir)
		cleanup()
		return nil, err
	}
	sb, err := p.newSandbox(spec, sessionData{Dir: dir, Host: p.opts.Host, Isolation: p.opts.Isolation, Status: string(sandbox.StatusRunning)})
	if err != nil {
		unbindAll(dir)
		cleanup()
		return nil, err
	}
	if p.opts.Isolation == IsolationNamespaces {
		// Fail now, with the reason and the opt-out, rather than on the
		// first tool call.
		if err := sb.probe(ctx); err != nil {
			sb.wsd.Close()
			unbindAll(dir)
			cleanup()
			return nil, err
		}
	}
	return sb, nil
}

// Open reconnects to a sandbox from its session state.
func (p *Provider) Open(ctx context.Context, spec sandbox.Spec, st sandbox.SessionState) (sandbox.Sandbox, error) {
	if st.Provider != "" && st.Provider != p.Kind() {
		return nil, fmt.Errorf("session state belongs to provider %q", st.Provider)
	}
	var data sessionData
	if err := json.Unmarshal(st.Data, &data); err != nil || data.Dir == "" {
		return nil, fmt.Errorf("session state is unreadable (%v): remove it with `agentctl state rm` and apply again", err)
	}
	// Commands always run with the isolation the provider is configured
	// with now; plan replaces a sandbox whose isolation changed.
	data.Isolation = p.opts.Isolation
	if err := p.check(&spec); err != nil {
		return nil, err
	}
	if err := p.owned(spec, data); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(data.Dir, markerName)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("sandbox directory %s: %w", data.Dir, sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("checking the sandbox directory: %w", err)
	}
	if data.Status == "" {
		data.Status = string(sandbox.StatusRunning)
	}
	if data.Host == "" {
		// It is here, so it is this machine's: recorded from now on.
		data.Host = p.opts.Host
	}
	if err := bindMounts(filepath.Join(data.Dir, "workspace"), spec.Mounts); err != nil {
		return nil, err
	}
	return p.newSandbox(spec, data)
}

// owned checks that the sandbox of data belongs to this working
// directory: made on this machine (when the state records its machine)
// under spec.StateDir. One that belongs to another working directory or
// machine, sharing the state through a backend, is a
// *sandbox.ElsewhereError; but on this machine the other directory can
// be looked at, and a sandbox whose directory is gone is missing (plan
// restores it from its snapshot), as one gone from this directory is.
func (p *Provider) owned(spec sandbox.Spec, data sessionData) error {
	otherHost := data.Host != "" && p.opts.Host != "" && data.Host != p.opts.Host
	otherDir := spec.StateDir != "" && filepath.Dir(filepath.Clean(data.Dir)) != filepath.Clean(spec.StateDir)
	if !otherHost && !otherDir {
		return nil
	}
	if !otherHost {
		if _, err := os.Stat(filepath.Join(data.Dir, markerName)); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sandbox directory %s, made by another working directory, no longer exists: %w", data.Dir, sandbox.ErrNotFound)
		}
	}
	where := data.Dir
	if data.Host != "" {
		where += " on host " + data.Host
	}
	return fmt.Errorf("%w (this working directory keeps its sandboxes in %s)", &sandbox.ElsewhereError{Where: where}, spec.StateDir)
}

// removeLeftovers removes sandbox directories carrying spec's lineage and
// address in their marker: ones whose creation an earlier, killed
// agentctl never recorded in the state (see sandbox.RemoveLeftovers).
func removeLeftovers(ctx context.Context, spec sandbox.Spec, name string) error {
	list := func(context.Context) ([]string, error) {
		dirs, err := filepath.Glob(filepath.Join(spec.StateDir, name+"-*"))
		if err != nil {
			return nil, fmt.Errorf("looking for sandbox directories an interrupted create left: %w", err)
		}
		return dirs, nil
	}
	owner := func(dir string) (lineage, address string) {
		b, err := os.ReadFile(filepath.Join(dir, markerName))
		if err != nil {
			return "", ""
		}
		var mk marker
		if json.Unmarshal(b, &mk) != nil {
			return "", ""
		}
		return mk.Lineage, mk.Address
	}
	remove := func(_ context.Context, dir string) error {
		if err := removeTree(dir); err != nil {
			return fmt.Errorf("removing %s, left by an interrupted create: %w", dir, err)
		}
		return nil
	}
	return sandbox.RemoveLeftovers(ctx, spec, list, owner, remove)
}
