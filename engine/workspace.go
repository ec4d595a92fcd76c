package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// OpenWorkspace connects to a managed sandbox for exec and tool calls,
// starting it if it is stopped. The returned stop func puts it back the
// way it was.
func (e *Engine) OpenWorkspace(ctx context.Context, st *state.State, addr string) (*sandbox.Workspace, func() error, error) {
	ss := st.Sandboxes[addr]
	if ss == nil {
		return nil, nil, fmt.Errorf("%s is not in the state; run agentctl apply to create it (agentctl state list shows what exists)", addr)
	}
	if ss.RestorePending != nil {
		return nil, nil, fmt.Errorf("%s: its last restore from %s did not finish, so its workspace is incomplete; run agentctl apply to restore it", addr, ss.Snapshot)
	}
	if ss.Status == statusDeleted {
		onExit := "stop"
		if e.Config != nil && e.Config.SandboxInstances[addr] != nil && e.Config.SandboxInstances[addr].OnExit != "" {
			onExit = e.Config.SandboxInstances[addr].OnExit
		}
		return nil, nil, fmt.Errorf("%s was removed after the last apply, its workspace kept in its snapshot (on_exit = %q); a run that needs it restores it (on_exit = \"keep\" keeps it for agentctl exec)", addr, onExit)
	}
	sb, err := e.openSandbox(ctx, st, addr)
	if ee, ok := errors.AsType[*sandbox.ElsewhereError](err); ok {
		return nil, nil, fmt.Errorf("%s lives in %s: use it there, or apply a run here that needs it, which restores it here from its latest snapshot and makes this working directory its owner", addr, ee.Where)
	}
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, nil, fmt.Errorf("%s no longer exists at its provider; run agentctl apply to restore it from its snapshot", addr)
	}
	if err != nil {
		return nil, nil, err
	}
	status, err := sb.Refresh(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", addr, err)
	}
	restore := func() error { return nil }
	switch status {
	case sandbox.StatusMissing:
		return nil, nil, fmt.Errorf("%s no longer exists at its provider; run agentctl apply to restore it from its snapshot", addr)
	case sandbox.StatusStopped:
		if err := sb.Start(ctx); err != nil {
			return nil, nil, fmt.Errorf("%s: starting the stopped sandbox: %w", addr, err)
		}
		restore = func() error {
			// Stopped again even when the command was interrupted, within
			// a bounded time.
			cctx, cancel := sandbox.CleanupContext(ctx)
			defer cancel()
			if err := sb.Stop(cctx); err != nil {
				return fmt.Errorf("%s: stopping the sandbox again: %w", addr, err)
			}
			return nil
		}
	}
	ws := e.workspace(addr, sb)
	ws.URLs = maps.Clone(ss.URLs)
	if sbc := e.Config.SandboxInstances[addr]; sbc != nil {
		// A start publishes Docker ports anew: ask the provider rather than
		// trust the recorded URLs.
		for _, port := range sbc.Ports {
			if u, err := sb.PortURL(ctx, port); err == nil {
				if ws.URLs == nil {
					ws.URLs = map[string]string{}
				}
				ws.URLs[fmt.Sprint(port)] = u
			}
		}
	}
	return ws, restore, nil
}

// WorkspaceRoot is the workspace root of a configured sandbox.
func (e *Engine) WorkspaceRoot(addr string) string {
	if sbc := e.Config.SandboxInstances[addr]; sbc != nil {
		return manifestRoot(e.Config, sbc)
	}
	return "/workspace"
}

// workspace is the workspace of a running sandbox, with its manifest's
// environment and the scrubber.
func (e *Engine) workspace(addr string, sb sandbox.Sandbox) *sandbox.Workspace {
	ws := &sandbox.Workspace{Sandbox: sb, Address: addr, Scrub: e.scrubber()}
	if sbc := e.Config.SandboxInstances[addr]; sbc != nil {
		m := sandboxManifest(e.Config, sbc)
		ws.Env, ws.EphemeralEnv = m.Env, m.EphemeralEnv
	}
	return ws
}
