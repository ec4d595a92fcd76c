//go:build !unix

package mcphost

import "os/exec"

// startInGroup starts cmd. Without process groups, stopping the server
// stops its process alone, and nothing ties it to agentctl.
func startInGroup(cmd *exec.Cmd, done func(error)) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { done(cmd.Wait()) }()
	return nil
}

// groupWatcher watches nothing here.
type groupWatcher struct{}

func watchGroup(int) (*groupWatcher, error) { return nil, nil }

func (*groupWatcher) stop() {}

// exitedNow reports false: the server's exit is known once it is reaped
// (hostServer.exited).
func exitedNow(int) bool { return false }
