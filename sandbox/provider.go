package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
)

// The labels a provider puts on everything it creates (containers,
// remote sandboxes), so that what it made can be found again: by
// ListManaged-style listings and by RemoveLeftovers.
const (
	// LabelManaged is "true" on everything agentctl created.
	LabelManaged = "dev.agentctl.managed"
	// LabelLineage is the state lineage (Spec.Lineage).
	LabelLineage = "dev.agentctl.lineage"
	// LabelAddress is the sandbox's configuration address (Spec.Address).
	LabelAddress = "dev.agentctl.address"
)

// Labels returns the labels for what a provider creates for spec: extra
// (labels the user configured), then LabelManaged, and LabelLineage and
// LabelAddress when spec has them. agentctl's own labels win over extra.
func Labels(spec Spec, extra map[string]string) map[string]string {
	l := make(map[string]string, len(extra)+3)
	maps.Copy(l, extra)
	l[LabelManaged] = "true"
	if spec.Lineage != "" {
		l[LabelLineage] = spec.Lineage
	}
	if spec.Address != "" {
		l[LabelAddress] = spec.Address
	}
	return l
}

// Command returns the argv req runs: Argv when it is set, otherwise
// Shell run by /bin/sh -c. It refuses a request with neither, an empty
// program name, and arguments holding a NUL byte (which no program can
// receive).
func (req ExecRequest) Command() ([]string, error) {
	argv := req.Argv
	if len(argv) == 0 {
		if req.Shell == "" {
			return nil, errors.New("exec: neither a command (argv) nor a shell string was given")
		}
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	if argv[0] == "" {
		return nil, errors.New("exec: the program name is empty")
	}
	for i, a := range argv {
		if strings.ContainsRune(a, 0) {
			return nil, fmt.Errorf("exec: argument %d contains a NUL byte, which no program can receive", i)
		}
	}
	return argv, nil
}

// CleanupTimeout bounds the work a CleanupContext allows.
const CleanupTimeout = 30 * time.Second

// CleanupContext returns the context for cleaning up after an operation
// under parent failed or was interrupted (deleting a half-created
// sandbox, killing a timed-out command, removing a temporary file). It
// keeps parent's values but not its cancellation, so an interrupt does
// not also abort the cleanup, and it ends after CleanupTimeout, so a
// cleanup against a provider that does not answer cannot hang. Call the
// returned cancel function when the cleanup is done.
func CleanupContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), CleanupTimeout)
}

// RemoveLeftovers removes what an interrupted create of spec left
// behind: a sandbox (directory, container, remote sandbox) created for
// spec's lineage and address whose creation the state never recorded
// because agentctl died first. The state never holds two sandboxes at one
// address, so such a sandbox is always a leftover.
//
// list returns the provider's candidates (it may already filter by
// labels); owner says which lineage and address a candidate was created
// for ("" when it cannot tell: it is then kept); remove deletes one, and
// its error, which should name what it removed, is returned as it is.
// Nothing is removed when spec has no lineage or no address, since then
// what was created for it cannot be told apart.
func RemoveLeftovers[T any](ctx context.Context, spec Spec, list func(context.Context) ([]T, error), owner func(T) (lineage, address string), remove func(context.Context, T) error) error {
	if spec.Lineage == "" || spec.Address == "" {
		return nil
	}
	found, err := list(ctx)
	if err != nil {
		return err
	}
	for _, c := range found {
		if lineage, address := owner(c); lineage != spec.Lineage || address != spec.Address {
			continue
		}
		if err := remove(ctx, c); err != nil {
			return err
		}
	}
	return nil
}
