// Package sandbox defines the contract every sandbox provider (local,
// docker, daytona, kubernetes) implements, Provider and Sandbox, and what is shared
// above and beside it: the workspace path policy (CleanPath), Workspace
// (a sandbox with its environment and the Scrubber that masks sensitive
// values in what it returns), the head+tail output capture, and the
// helpers the providers share (Labels, ExecRequest.Command,
// RemoveLeftovers, CleanupContext).
//
// The host file layer is in sandbox/hostfs, snapshot files in
// sandbox/archive and manifest materialization in sandbox/manifest.
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"time"
)

// Status is what a refresh learns about a sandbox from its provider.
type Status string

const (
	StatusRunning Status = "running"
	StatusStopped Status = "stopped"
	// StatusMissing means the provider no longer knows the sandbox: plan
	// says restore.
	StatusMissing Status = "missing"
)

// ErrNotFound is returned (wrapped) by Provider.Open and Sandbox methods
// when the provider says the sandbox no longer exists.
var ErrNotFound = errors.New("sandbox not found")

// ErrUnavailable is returned (wrapped) by Sandbox methods when the
// sandbox exists but cannot serve the call: it is stopped, or the
// provider lost its connection to it (a local sandbox's init died, the
// container's exec stream broke). It is the infrastructure's failure, not
// the command's: see UnavailableError.
var ErrUnavailable = errors.New("sandbox unavailable")

// ErrPathEscape is returned (wrapped) when a path leaves the workspace,
// lexically or through a symlink.
var ErrPathEscape = errors.New("path escapes the workspace")

// Resources are optional limits; zero means the provider's default.
type Resources struct {
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	DiskGB   int64   `json:"disk_gb,omitempty"`
	PIDs     int64   `json:"pids,omitempty"`
	GPUs     int64   `json:"gpus,omitempty"`
}

// Spec is everything a provider needs to create one sandbox. It never
// carries sensitive values: ephemeral env is passed per exec.
type Spec struct {
	// Address is the sandbox's configuration address, e.g. sandbox.review["pricing"].
	Address string
	// Lineage is the state lineage; providers label what they create with
	// it and Address so nothing is left untracked.
	Lineage string
	// Root is the workspace root inside the sandbox (the manifest root),
	// e.g. /workspace.
	Root string
	// Image is the container image (docker, daytona, kubernetes); empty
	// for local.
	Image string
	// Network is "none" (the default), "host", "bridge" or a named network.
	Network string
	// Ports are exposed container ports.
	Ports     []int
	Resources Resources
	// Settings are the provider's own sandbox settings, as its provider
	// type decoded and checked them from the configuration (for example
	// *docker.SandboxSettings); nil when there are none.
	Settings any
	// StateDir is a directory under the state directory the provider may
	// use for its own data (the local provider keeps workspaces there).
	StateDir string
	// Accounts are the manifest's users and groups: the provider creates
	// them when it creates the sandbox (a change replaces the sandbox),
	// and runs a request whose User names one as that user. A provider
	// that cannot must refuse a Spec with accounts.
	Accounts Accounts
	// Mounts are storage mounts already made on this machine (package
	// sandbox/mount) that the provider binds into the workspace when it
	// creates the sandbox, and again when it opens one whose binding is
	// gone. A provider that cannot must refuse a Spec with mounts.
	Mounts []Mount
}

// Mount is a storage mount made on this machine, to be bound into a
// sandbox's workspace.
type Mount struct {
	// Path is workspace-relative, like data/room.
	Path string
	// HostDir is the absolute host directory the mount is at.
	HostDir string
	// ReadOnly mounts refuse writes (EROFS).
	ReadOnly bool
}

// SessionState is what state.json stores to reconnect to a sandbox. It
// must not contain credentials.
type SessionState struct {
	Provider string          `json:"provider"`
	ID       string          `json:"id"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// Provider creates sandboxes of one kind and reconnects to existing ones.
type Provider interface {
	// Kind is "local", "docker", "daytona" or "kubernetes".
	Kind() string
	// Create creates and starts a new, empty sandbox whose workspace root
	// exists and is writable.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Open reconnects to a sandbox from its session state without starting
	// it. It returns an error wrapping ErrNotFound if it is gone, and one
	// wrapping an *ElsewhereError if it belongs to another working
	// directory or machine.
	Open(ctx context.Context, spec Spec, st SessionState) (Sandbox, error)
}

// FileInfo describes one workspace entry. Path is workspace-relative
// with forward slashes.
type FileInfo struct {
	Path    string
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
	// Target is the link target when Mode is a symlink.
	Target string
}

// ExecRequest is one command to run in a sandbox.
type ExecRequest struct {
	// Argv runs a program directly. When empty, Shell is run with /bin/sh -c.
	Argv  []string
	Shell string
	// Workdir is workspace-relative ("" = the workspace root).
	Workdir string
	// Env is added to the sandbox's environment for this command only
	// (manifest env and ephemeral env are merged in by Workspace).
	Env map[string]string
	// Timeout kills the whole process tree when it expires; 0 = no limit.
	Timeout time.Duration
	Stdin   io.Reader
	// OutputLimit is the number of bytes kept per stream (head and tail
	// halves); 0 means DefaultOutputLimit.
	OutputLimit int
	// User runs the command as this user of Spec.Accounts (a capability's
	// run_as); "" runs it as the sandbox's default user. A provider that
	// cannot switch users refuses a request with one (it never runs it as
	// another user); a name not declared is an *UnknownUserError.
	User string
}

// ExecResult is the outcome of one command.
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	Wall     time.Duration
	// Truncated is true when either stream was cut; the Original sizes say
	// how large each stream really was.
	Truncated      bool
	OriginalStdout int64
	OriginalStderr int64
	TimedOut       bool
}

// Sandbox is one live workspace. Every path argument is workspace-relative
// (forward slashes, already checked lexically by CleanPath); an
// implementation must still refuse, with ErrPathEscape, to follow a symlink
// that leaves the workspace.
type Sandbox interface {
	// ID is the provider's id (directory, container id, Daytona id).
	ID() string
	// Session is the serializable state to reconnect later.
	Session() SessionState
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	// Delete removes the sandbox and everything it owns. Deleting a
	// missing sandbox is not an error.
	Delete(ctx context.Context) error
	Refresh(ctx context.Context) (Status, error)

	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)

	// ReadFile reads at most limit bytes (limit <= 0: no limit) and fails
	// when the file is larger.
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	// WriteFile creates parent directories as needed.
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	// Remove removes a file or an empty directory.
	Remove(ctx context.Context, path string) error
	// Mkdir creates a directory and its parents.
	Mkdir(ctx context.Context, path string) error
	// Stat does not follow a final symlink.
	Stat(ctx context.Context, path string) (FileInfo, error)
	ReadDir(ctx context.Context, path string) ([]FileInfo, error)

	// CopyIn extracts a tar stream into dir (workspace-relative) with the
	// safe-extraction rules of Extract.
	CopyIn(ctx context.Context, dir string, tar io.Reader) error
	// CopyOut streams a tar of dir; member names are relative to dir.
	CopyOut(ctx context.Context, dir string) (io.ReadCloser, error)

	// PortURL resolves an exposed port to a URL reachable from the host.
	PortURL(ctx context.Context, port int) (string, error)
}
