// Package nsinit is the sandbox init of the local provider's namespaced
// isolation: the agentctl binary started again, with Env set, in new
// user, mount, PID, IPC, UTS and network namespaces. It builds the
// sandbox's private root once, pivots into it, and serves the commands
// agentctl sends over its control socket, each in a PID namespace of its
// own (spawn_linux.go). providers/local starts it and speaks to it
// (client_linux.go there); this package holds the init's side and the
// messages they exchange.
//
// It is a package of its own, importing only golang.org/x/sys/unix and
// the standard library packages every program initializes first, so
// that the init starts before most packages are initialized: see init
// in init_linux.go.
package nsinit

// Env is the environment variable that turns the binary into the
// sandbox init; its value is the control socket's descriptor.
const Env = "_AGENTCTL_SANDBOX_INIT"

// Config is what the parent sends the init.
type Config struct {
	Root    string `json:"root"` // workspace mount point
	HostNet bool   `json:"host_net"`
	// MountFDs is true when the workspace and /tmp arrive as mount file
	// descriptors (rights[0], rights[1]); otherwise they are bound from
	// WorkspacePath and TmpPath.
	MountFDs      bool     `json:"mount_fds"`
	WorkspacePath string   `json:"workspace_path,omitempty"`
	TmpPath       string   `json:"tmp_path,omitempty"`
	ReadOnly      []string `json:"read_only,omitempty"`
	PIDs          int64    `json:"pids"`
	// Passwd and Group are the sandbox's /etc/passwd and /etc/group:
	// root, nobody and the manifest's users and groups.
	Passwd string `json:"passwd"`
	Group  string `json:"group"`
	// Mounts are storage mounts made on the host, bound inside the
	// workspace after it is mounted.
	Mounts []Mount `json:"mounts,omitempty"`
}

// MaxMounts bounds the storage mounts of one sandbox (each is a
// descriptor passed to the init).
const MaxMounts = 32

// Mount is a host directory (a storage mount) bound at Target, an
// absolute path inside the sandbox under the workspace root.
type Mount struct {
	HostDir  string `json:"host_dir"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Credentials are the ids a command of a manifest user runs with.
type Credentials struct {
	UID    int   `json:"uid"`
	GID    int   `json:"gid"`
	Groups []int `json:"groups,omitempty"`
}

// ShmSizeMB is the size of the sandbox's /dev/shm tmpfs, in MiB, and
// ShmInodes its number of inodes.
const (
	ShmSizeMB = 64
	ShmInodes = 16384
)

// Status is the init's answer when it could not build the sandbox.
type Status struct {
	Error string `json:"error"`
}

// SetupFailedCode is the init's exit code when it could not build the
// sandbox (the reason is on the control socket).
const SetupFailedCode = 125

// ReadyByte is what the init sends once the sandbox is built.
const ReadyByte = 'R'

// ExecRequest is one command, sent on its own connection.
type ExecRequest struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"` // absolute, inside the sandbox
	// TTY asks for a terminal of Rows x Cols on stdio, which becomes the
	// command's controlling terminal. The request then carries no
	// descriptors: the init opens the terminal from the sandbox's own
	// /dev/pts, so that the command finds it by name (ttyname(3)), and
	// sends its controlling side back first (PtyByte).
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	// Cred, when set, are the ids of the manifest user the command runs
	// as (agentctl resolves the user's name).
	Cred *Credentials `json:"cred,omitempty"`
}

// ExecStatus is the init's answer once the command's namespace is gone.
type ExecStatus struct {
	Code   int    `json:"code"`
	Killed bool   `json:"killed,omitempty"` // killed on request
	Error  string `json:"error,omitempty"`  // the command could not be started
}

// KillByte on a command's connection asks the init to kill the command.
const KillByte = 'K'

// PtyByte, with the controlling side (master) of the command's terminal
// as its one descriptor, is the first byte of the answer to a TTY
// request.
const PtyByte = 'P'

// StartedByte precedes the answer once the init has taken the command,
// before it starts it: agentctl retries (in a new init) only a command
// that was never taken.
const StartedByte = 'S'

// MaxMessage bounds a request or answer.
const MaxMessage = 64 << 20
