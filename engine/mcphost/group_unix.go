//go:build unix

package mcphost

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// killGroup kills the process group pgid.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// groupWatcher is a shell that kills a server's process group when
// agentctl dies without stopping the server: it waits for the end of a
// pipe whose only writer is agentctl, which the kernel closes when
// agentctl dies however it dies.
type groupWatcher struct {
	cmd  *exec.Cmd
	pipe *os.File // the write end, never written
}

// watchScript reads stdin until its end, then kills the group $1.
const watchScript = `read -r _; kill -s KILL -- "-$1"`

func watchGroup(pgid int) (*groupWatcher, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", watchScript, "agentctl-mcp-watch", strconv.Itoa(pgid))
	cmd.Stdin = r
	cmd.Env = []string{}
	// A group of its own: a Ctrl-C at agentctl's terminal is agentctl's
	// to handle, not the watcher's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	return &groupWatcher{cmd: cmd, pipe: w}, nil
}

// stop ends the watcher without letting it kill anything: it is killed
// before its pipe closes.
func (g *groupWatcher) stop() {
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
	g.pipe.Close()
}
