package sandbox

import (
	"context"
	"maps"
	"sort"
	"strings"
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

// Redacted is what a sensitive value is replaced with.
const Redacted = "(sensitive)"

// Scrubber replaces every occurrence of a set of sensitive strings, the
// way CI systems mask secrets in logs. The zero value and nil scrub
// nothing.
type Scrubber struct {
	r *strings.Replacer
}

// NewScrubber returns a scrubber for values; empty values and values
// shorter than 3 bytes are ignored (masking "a" would mangle everything).
func NewScrubber(values []string) *Scrubber {
	vs := make([]string, 0, len(values))
	for _, v := range values {
		if len(v) >= 3 {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return &Scrubber{}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.Slice(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
	pairs := make([]string, 0, 2*len(vs))
	for _, v := range vs {
		pairs = append(pairs, v, Redacted)
	}
	return &Scrubber{r: strings.NewReplacer(pairs...)}
}

// String scrubs s.
func (s *Scrubber) String(v string) string {
	if s == nil || s.r == nil {
		return v
	}
	return s.r.Replace(v)
}

// Bytes scrubs b.
func (s *Scrubber) Bytes(b []byte) []byte {
	if s == nil || s.r == nil || b == nil {
		return b
	}
	return []byte(s.r.Replace(string(b)))
}
