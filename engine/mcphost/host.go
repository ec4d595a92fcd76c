package mcphost

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"time"
)

// stopGrace is how long a stdio server has to exit once its stdin is
// closed before it is killed.
const stopGrace = 2 * time.Second

// hostServer is a stdio server running on this machine. It runs in a
// process group of its own, which is killed whenever the server ends, so
// nothing it started (a shell wrapper's child) outlives it; and it dies
// with agentctl, even with a kill -9: on Linux the kernel kills it when
// agentctl goes (startInGroup), and on every Unix a watcher kills its
// group then (watchGroup).
type hostServer struct {
	cmd    *exec.Cmd
	stdin  *os.File      // the write end of the server's stdin
	stdout *os.File      // the read end of its stdout
	stderr *os.File      // the read end of its stderr, copied to the log
	copied chan struct{} // closed once its stderr is copied
	exited chan struct{} // closed once it exited and its group was killed
	watch  *groupWatcher // nil when no watcher could be started
}

// startHostServer starts srv's command in its directory, with agentctl's
// environment plus srv.Env; the server's stderr goes to stderr.
func startHostServer(srv *Server, stderr io.Writer, logf func(string, ...any)) (*hostServer, error) {
	cmd := exec.Command(srv.Command[0], srv.Command[1:]...)
	cmd.Dir = srv.Dir
	cmd.Env = serverEnv(srv.Env)
	// Pipes for stdin, stdout and stderr: the server gets stdin's read
	// end and the others' write ends, closed here once it runs.
	var r, w [3]*os.File
	for i := range r {
		var err error
		if r[i], w[i], err = os.Pipe(); err != nil {
			closeFiles(slices.Concat(r[:i], w[:i])...)
			return nil, fmt.Errorf("mcp_server.%s: creating a pipe to its stdio: %w", srv.Name, err)
		}
	}
	inR, inW, outR, outW, errR, errW := r[0], w[0], r[1], w[1], r[2], w[2]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	h := &hostServer{cmd: cmd, stdin: inW, stdout: outR, stderr: errR, copied: make(chan struct{}), exited: make(chan struct{})}
	err := startInGroup(cmd, func(err error) {
		close(h.exited)
		if err != nil {
			logf("the server's process ended: %v", err)
		} else {
			logf("the server's process exited with code 0")
		}
	})
	closeFiles(inR, outW, errW)
	if err != nil {
		closeFiles(inW, outR, errR)
		return nil, fmt.Errorf("mcp_server.%s did not start: %w", srv.Name, err)
	}
	go func() {
		_, _ = io.Copy(stderr, errR)
		close(h.copied)
	}()
	if h.watch, err = watchGroup(cmd.Process.Pid); err != nil {
		logf("the server is not watched: if agentctl is killed, what the server started may keep running: %v", err)
	}
	return h, nil
}

// stop asks the server to exit by closing its stdin, kills it if it has
// not exited within stopGrace, and kills its process group.
func (h *hostServer) stop() {
	h.stdin.Close()
	select {
	case <-h.exited:
	case <-time.After(stopGrace):
		// Its group is killed once it exits (startInGroup).
		_ = h.cmd.Process.Kill()
		<-h.exited
	}
	h.stdout.Close()
	// The group is gone; a process that left it may still hold stderr.
	select {
	case <-h.copied:
	case <-time.After(stopGrace):
	}
	h.stderr.Close()
	if h.watch != nil {
		h.watch.stop()
	}
}

// running reports whether the server still runs: not once it exited,
// even before it is reaped (exitedNow), so a call made after the server
// exited never goes to it.
func (h *hostServer) running() bool {
	select {
	case <-h.exited:
		return false
	default:
		return !exitedNow(h.cmd.Process.Pid)
	}
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
