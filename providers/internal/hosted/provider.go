package hosted

import (
	"context"
	"fmt"
	"path"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/agentctl/agentctl/sandbox"
)

// DecodeProvider decodes a provider block into a new T
// (registry.Type.DecodeProvider).
func DecodeProvider[T any](body hcl.Body) (any, hcl.Diagnostics) {
	s := new(T)
	diags := gohcl.DecodeBody(body, nil, s)
	return s, diags
}

// ProviderSettings returns settings as the *T its provider block
// decodes into, or an error naming what it is instead.
func ProviderSettings[T any](settings any) (*T, error) {
	s, ok := settings.(*T)
	if !ok {
		return nil, fmt.Errorf("provider settings are %T, not %T", settings, (*T)(nil))
	}
	return s, nil
}

// SandboxSettings returns spec's settings as *T, nil when it has none.
func SandboxSettings[T any](spec sandbox.Spec) (*T, error) {
	st, ok := spec.Settings.(*T)
	if !ok && spec.Settings != nil {
		return nil, fmt.Errorf("sandbox settings are %T, not %T", spec.Settings, (*T)(nil))
	}
	return st, nil
}

// WorkspaceRoot returns the cleaned workspace root: root, or def when
// root is empty. It must be absolute and below /.
func WorkspaceRoot(root, def string) (string, error) {
	if root == "" {
		root = def
	}
	if !path.IsAbs(root) || path.Clean(root) == "/" {
		return "", fmt.Errorf("workspace root %q must be an absolute path below /", root)
	}
	return path.Clean(root), nil
}

// FailedCreate returns err, the failure of a create, after removing the
// sandbox (noun, in the service's word) the create may have made before
// it failed (a lost answer): removeLeftovers runs with a context that
// outlives ctx's cancellation. When that fails too, both are said.
func FailedCreate(ctx context.Context, err error, noun string, removeLeftovers func(context.Context) error) error {
	cctx, cancel := sandbox.CleanupContext(ctx)
	defer cancel()
	if lerr := removeLeftovers(cctx); lerr != nil {
		return fmt.Errorf("%w; looking for a %s the failed create may have made: %v", err, noun, lerr)
	}
	return err
}

// Discard returns err, the failure of a step after the service made the
// sandbox, after removing that sandbox with remove, which runs with a
// context that outlives ctx's cancellation: the engine records only
// sandboxes whose create succeeded, so one left would run, and be
// billed, untracked. When remove fails too, the error says so with
// doing (what remove did, such as "deleting the sandbox (id x)") and
// fix (what the user is to do instead).
func Discard(ctx context.Context, err error, remove func(context.Context) error, doing, fix string) error {
	cctx, cancel := sandbox.CleanupContext(ctx)
	defer cancel()
	if rerr := remove(cctx); rerr != nil {
		return fmt.Errorf("%w; %s also failed: %v; %s", err, doing, rerr, fix)
	}
	return err
}

// OpenArgs checks what Open is given before it asks the service: that
// ss is provider's session for a noun (CheckSession), and spec's settings
// (a *T, nil when it has none) and workspace root (def when it names
// none), which it returns.
func OpenArgs[T any](ss sandbox.SessionState, spec sandbox.Spec, provider, noun, def string) (*T, string, error) {
	if err := CheckSession(ss, provider, noun); err != nil {
		return nil, "", err
	}
	st, err := SandboxSettings[T](spec)
	if err != nil {
		return nil, "", err
	}
	root, err := WorkspaceRoot(spec.Root, def)
	if err != nil {
		return nil, "", err
	}
	return st, root, nil
}
