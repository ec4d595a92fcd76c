//go:build unix

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// Sandbox is one local workspace.
type Sandbox struct {
	p    *Provider
	spec sandbox.Spec
	dir  string // the sandbox directory (holds marker, workspace/, tmp/)
	host string // the machine it was made on (sessionData.Host)
	ws   string // dir/workspace
	tmp  string // dir/tmp
	wsd  *hostfs.Dir

	mu     sync.Mutex
	status sandbox.Status

	// The long-lived init of a namespaced sandbox (nil until needed).
	initMu sync.Mutex
	ip     *initProc
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

func (p *Provider) newSandbox(spec sandbox.Spec, data sessionData) (*Sandbox, error) {
	ws := filepath.Join(data.Dir, "workspace")
	wsd, err := hostfs.OpenRoot(ws)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("workspace %s: %w", ws, sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("opening the workspace: %w", err)
	}
	return &Sandbox{
		p: p, spec: spec, dir: data.Dir, host: data.Host, ws: ws, tmp: filepath.Join(data.Dir, "tmp"), wsd: wsd,
		status: sandbox.Status(data.Status),
	}, nil
}

// ID is the sandbox directory.
func (s *Sandbox) ID() string { return s.dir }

// Dir is the workspace directory on the host.
func (s *Sandbox) Dir() string { return s.ws }

// Session is what state.json stores to reconnect.
func (s *Sandbox) Session() sandbox.SessionState {
	s.mu.Lock()
	st := s.status
	s.mu.Unlock()
	b, _ := json.Marshal(sessionData{Dir: s.dir, Host: s.host, Isolation: s.p.opts.Isolation, Status: string(st)})
	return sandbox.SessionState{Provider: "local", ID: s.dir, Data: b}
}

func (s *Sandbox) exists() error {
	if _, err := os.Stat(filepath.Join(s.dir, markerName)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sandbox directory %s: %w", s.dir, sandbox.ErrNotFound)
		}
		return fmt.Errorf("checking the sandbox directory: %w", err)
	}
	return nil
}

func (s *Sandbox) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status != sandbox.StatusStopped
}

// Start marks the sandbox running. A namespaced sandbox's init starts
// with its first command.
func (s *Sandbox) Start(ctx context.Context) error {
	if err := s.exists(); err != nil {
		return err
	}
	s.mu.Lock()
	s.status = sandbox.StatusRunning
	s.mu.Unlock()
	return nil
}

// Stop marks the sandbox stopped and ends every process in it; Exec
// refuses until Start.
func (s *Sandbox) Stop(ctx context.Context) error {
	if err := s.stopInit(); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	if err := s.exists(); err != nil {
		return err
	}
	s.mu.Lock()
	s.status = sandbox.StatusStopped
	s.mu.Unlock()
	return nil
}

// Refresh reports missing when the directory is gone.
func (s *Sandbox) Refresh(ctx context.Context) (sandbox.Status, error) {
	if err := s.exists(); err != nil {
		if errors.Is(err, sandbox.ErrNotFound) {
			return sandbox.StatusMissing, nil
		}
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, nil
}

// Delete removes the sandbox directory. It refuses a directory without
// the provider's marker file, so a tampered state file cannot make it
// remove something else.
func (s *Sandbox) Delete(ctx context.Context) error {
	if err := s.stopInit(); err != nil {
		return fmt.Errorf("deleting: %w", err)
	}
	if err := s.removeCgroup(); err != nil {
		return fmt.Errorf("deleting: %w", err)
	}
	if _, err := os.Lstat(s.dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := checkMarker(s.dir); err != nil {
		return err
	}
	s.wsd.Close()
	if err := removeTree(s.dir); err != nil {
		if !errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("deleting %s: %w", s.dir, err)
		}
		// Files of the manifest's users, when agentctl is an ordinary
		// user that did not start its own user namespace.
		if err2 := s.removeInUserNS(); err2 != nil {
			return fmt.Errorf("deleting %s: %w (removing it as root of a user namespace that maps this user's subordinate ids failed too: %v)", s.dir, err, err2)
		}
	}
	return nil
}

// checkMarker refuses a directory without the provider's marker file, so
// a tampered state file cannot make agentctl remove something else.
func checkMarker(dir string) error {
	if fi, err := os.Lstat(filepath.Join(dir, markerName)); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s was not created by agentctl (no %s): refusing to delete it", dir, markerName)
	}
	return nil
}

// removeTree removes a sandbox directory with hostfs.RemoveAll: however
// deep the tree a command built, with a bounded number of open
// directories, making directories a command left without permissions
// removable.
func removeTree(dir string) error {
	if err := unbindAll(dir); err != nil {
		return fmt.Errorf("unmounting the storage bound into %s: %w", dir, err)
	}
	return hostfs.RemoveAll(dir)
}

// Close ends the sandbox's processes (a namespaced sandbox's init) without
// changing its state; the next command starts them again. Every process of
// a sandbox also ends when agentctl exits. For long-running callers that
// drop a sandbox without stopping or deleting it.
func (s *Sandbox) Close() error {
	return s.stopInit()
}

// PortURL returns http://127.0.0.1:PORT; only sandboxes with network
// "host" share the host's loopback.
func (s *Sandbox) PortURL(ctx context.Context, port int) (string, error) {
	if port <= 0 || port > 65535 {
		return "", fmt.Errorf("port %d is out of range 1-65535", port)
	}
	if s.p.opts.Isolation == IsolationNamespaces && s.spec.Network != "host" {
		return "", fmt.Errorf("the sandbox has no network, so port %d is not reachable from the host: set network = \"host\" on the sandbox", port)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port), nil
}
