package sandbox

import "context"

// Drifter is an optional interface a Sandbox implements when it can tell
// that the sandbox no longer matches its specification although the
// configuration did not change: a docker image tag that now names another
// image, for example. Plan asks it after a refresh; a non-empty reason
// makes plan say replace, with the reason.
type Drifter interface {
	// Drift returns why the live sandbox differs from spec, or "" when it
	// does not (or the provider cannot tell).
	Drift(ctx context.Context, spec Spec) (reason string, err error)
}
