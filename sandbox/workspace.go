package sandbox

import (
	"context"
	"maps"
	"regexp"
	"sync"
)

// Workspace is a Sandbox together with what every tool needs around it:
// the manifest environment, the ephemeral (sensitive) environment, and the
// scrubber that removes sensitive values from everything it returns.
// Tools work through a Workspace, never through a provider directly.
type Workspace struct {
	Sandbox
	// Address is the sandbox's address (sandbox.NAME), for the errors that
	// say it failed; empty for a host directory.
	Address string
	// Env is the manifest's persisted environment.
	Env map[string]string
	// EphemeralEnv is injected into every exec and never persisted.
	EphemeralEnv map[string]string
	// Scrub replaces sensitive values in tool output; nil scrubs nothing.
	Scrub *Scrubber
	// URLs are the sandbox's exposed ports' URLs by port number, as
	// recorded in the state (sandbox.NAME.urls). Command tools receive
	// them as AGENTCTL_URL_<port>.
	URLs map[string]string
}

// Exec runs req with the manifest env and ephemeral env merged in (the
// request's own Env wins) and scrubs both output streams.
//
// When the sandbox failed under the command, the error is an
// *UnavailableError (see Unavailable): the command could not run, or it
// died of a signal because the sandbox stopped or vanished meanwhile
// (checked only for such exits, waiting briefly for the provider to
// notice).
func (w *Workspace) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	env := make(map[string]string, len(w.Env)+len(w.EphemeralEnv)+len(req.Env))
	maps.Copy(env, w.Env)
	maps.Copy(env, w.EphemeralEnv)
	maps.Copy(env, req.Env)
	req.Env = env
	res, err := w.Sandbox.Exec(ctx, req)
	res.Stdout = w.Scrub.Bytes(res.Stdout)
	res.Stderr = w.Scrub.Bytes(res.Stderr)
	if res.Truncated {
		res.Stdout = maskCuts(w.Scrub, res.Stdout)
		res.Stderr = maskCuts(w.Scrub, res.Stderr)
	}
	if err != nil {
		return res, w.Unavailable(ctx, err)
	}
	if killedBySignal(res) && ctx.Err() == nil {
		if uerr := w.stoppedUnder(ctx, res); uerr != nil {
			return res, uerr
		}
	}
	return res, nil
}

// ReadFile reads a file and scrubs sensitive values from it.
func (w *Workspace) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	b, err := w.Sandbox.ReadFile(ctx, path, limit)
	return w.Scrub.Bytes(b), w.Unavailable(ctx, err)
}

// markerRE finds the truncation markers HeadTail puts between the head and
// the tail of a stream (truncationMarker).
var markerRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\n…\d+ bytes truncated \(output was \d+ bytes\)…\n`)
})

// maskCuts masks what a truncation left of a sensitive value on either
// side of each truncation marker in b (already scrubbed): a value cut in
// two is matched by neither half. A marker printed by the command itself
// only masks more.
func maskCuts(s *Scrubber, b []byte) []byte {
	if !s.Active() {
		return b
	}
	locs := markerRE().FindAllIndex(b, -1)
	if locs == nil {
		return b
	}
	out := make([]byte, 0, len(b)+2*len(Redacted))
	prev := 0
	for _, loc := range locs {
		seg := string(b[prev:loc[0]])
		if prev > 0 {
			seg = s.MaskCutStart(seg)
		}
		out = append(out, s.MaskCutEnd(seg)...)
		out = append(out, b[loc[0]:loc[1]]...)
		prev = loc[1]
	}
	return append(out, s.MaskCutStart(string(b[prev:]))...)
}
