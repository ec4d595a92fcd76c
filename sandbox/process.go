package sandbox

import (
	"context"
	"fmt"
	"io"
	"maps"
)

// ProcessStarter is an optional interface a Sandbox implements when it
// can run a process whose standard streams stay attached while it runs:
// an MCP server speaking over stdio, an interactive program.
type ProcessStarter interface {
	// StartProcess starts the process and returns once it runs. The
	// process is killed when ctx is cancelled or Kill is called.
	StartProcess(ctx context.Context, req ProcessRequest) (Process, error)
}

// ProcessRequest is a process to start.
type ProcessRequest struct {
	// Argv runs a program directly. When empty, Shell is run with /bin/sh -c.
	Argv  []string
	Shell string
	// Workdir is workspace-relative ("" = the workspace root).
	Workdir string
	// Env is added to the sandbox's environment for this process only.
	Env map[string]string
}

// Command is the argv the request runs (see ExecRequest.Command).
func (r ProcessRequest) Command() ([]string, error) {
	return ExecRequest{Argv: r.Argv, Shell: r.Shell}.Command()
}

// Process is a running process in a sandbox.
type Process interface {
	// Stdin is the process's standard input; closing it sends EOF.
	Stdin() io.WriteCloser
	// Stdout and Stderr are its output streams. They end (io.EOF) when
	// the process has exited and its output is drained. A caller must
	// read both, or the process may block writing.
	Stdout() io.Reader
	Stderr() io.Reader
	// Wait waits for the process to exit and returns its exit code. It
	// returns an error when the sandbox could not tell (connection lost).
	// A killed process returns the code the provider reports (137 for
	// SIGKILL) and no error.
	Wait() (int, error)
	// Kill ends the process and everything it started. Killing a process
	// that has exited is not an error.
	Kill() error
}

// UnsupportedError says a sandbox lacks an optional capability.
type UnsupportedError struct {
	// What is the capability, like "processes with attached streams".
	What string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("this sandbox provider cannot run %s", e.What)
}

// StartProcess starts a process in the workspace with the manifest's
// environment merged in, as Exec does. The process's output is not
// scrubbed: the caller scrubs what it passes on (Workspace.Scrub).
func (w *Workspace) StartProcess(ctx context.Context, req ProcessRequest) (Process, error) {
	ps, ok := w.Sandbox.(ProcessStarter)
	if !ok {
		return nil, &UnsupportedError{What: "processes with attached streams"}
	}
	env := make(map[string]string, len(w.Env)+len(w.EphemeralEnv)+len(req.Env))
	maps.Copy(env, w.Env)
	maps.Copy(env, w.EphemeralEnv)
	maps.Copy(env, req.Env)
	req.Env = env
	p, err := ps.StartProcess(ctx, req)
	if err != nil {
		return nil, w.Unavailable(ctx, err)
	}
	return p, nil
}
