//go:build unix && !linux

package mcphost

import (
	"os/exec"
	"syscall"
)

// startInGroup starts cmd in a process group of its own. It returns once
// cmd runs; done gets cmd's Wait error once cmd exited and its group was
// killed. (No kernel ties the server to agentctl here: its watcher does.)
func startInGroup(cmd *exec.Cmd, done func(error)) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		err := cmd.Wait()
		// The group's id cannot be reused while any member lives.
		killGroup(cmd.Process.Pid)
		done(err)
	}()
	return nil
}

// exitedNow reports false: here the server's exit is known once it is
// reaped (hostServer.exited).
func exitedNow(int) bool { return false }
