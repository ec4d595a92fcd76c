package sandbox

import (
	"context"
	"errors"
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
	// TTY runs the process on a pseudo-terminal (its controlling
	// terminal) of Rows x Cols (0: DefaultTTYRows x DefaultTTYCols): its
	// output, stderr included, comes on Stdout; Stderr is empty.
	TTY        bool
	Rows, Cols int
	// User runs the process as this user of Spec.Accounts, as
	// ExecRequest.User does.
	User string
}

// The default size of a process's terminal.
const (
	DefaultTTYRows = 24
	DefaultTTYCols = 80
)

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

// StreamFunc runs a process to completion with the given streams: it
// copies stdin to the process (until EOF), writes the process's output to
// stdout and stderr, and returns its exit code once it has exited and its
// output is drained. Cancelling ctx must kill the process and everything
// it started. Providers whose exec already streams implement
// ProcessStarter with StartStreamed over it.
type StreamFunc func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (int, error)

// StartStreamed runs fn in the background and returns it as a Process.
// The process lives until it exits, Kill is called or ctx is cancelled.
func StartStreamed(ctx context.Context, fn StreamFunc) Process {
	ctx, cancel := context.WithCancel(ctx)
	p := &streamed{cancel: cancel, done: make(chan struct{})}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	p.stdin, p.stdout, p.stderr = inW, outR, errR
	go func() {
		defer close(p.done)
		p.code, p.err = fn(ctx, inR, outW, errW)
		if p.err != nil && ctx.Err() != nil {
			// Killed (Kill, or the caller's ctx): whatever the provider
			// saw of it (a cancelled call, output that could no longer be
			// passed on), it ends as a shell reports SIGKILL.
			p.code, p.err = 137, nil
		}
		// The process is gone: its output ends, and input to it fails.
		outW.Close()
		errW.Close()
		inR.CloseWithError(errProcessExited)
		cancel()
	}()
	return p
}

var errProcessExited = errors.New("the process has exited")

type streamed struct {
	cancel func()
	done   chan struct{}
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	stderr *io.PipeReader
	code   int
	err    error
}

func (p *streamed) Stdin() io.WriteCloser { return p.stdin }
func (p *streamed) Stdout() io.Reader     { return p.stdout }
func (p *streamed) Stderr() io.Reader     { return p.stderr }

func (p *streamed) Wait() (int, error) {
	<-p.done
	return p.code, p.err
}

// Kill cancels the process and waits until the provider reports it gone.
// Output not read yet is discarded, so a provider blocked writing it does
// not keep the process alive.
func (p *streamed) Kill() error {
	p.cancel()
	p.stdout.CloseWithError(errProcessExited)
	p.stderr.CloseWithError(errProcessExited)
	<-p.done
	return nil
}
