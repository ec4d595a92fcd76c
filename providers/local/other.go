//go:build unix && !linux

package local

import (
	"context"
	"errors"

	"github.com/agentctl/agentctl/sandbox"
)

// MaybeRunInit returns at once: the namespaced sandbox init exists on
// Linux only.
func MaybeRunInit() {}

func (s *Sandbox) probe(ctx context.Context) error {
	_, err := s.runNamespaced(ctx, nil)
	return err
}

func (s *Sandbox) runNamespaced(ctx context.Context, run *execRun) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{}, errors.New(`isolation "namespaces" needs Linux; set isolation = "none" in the provider "local" block to run commands without isolation (unsafe: they see and can change everything the agentctl user can)`)
}

func (s *Sandbox) startNamespaced(ctx context.Context, run *execRun) (sandbox.Process, error) {
	_, err := s.runNamespaced(ctx, run)
	return nil, err
}

type initProc struct{}

// accountsMappable: checkAccounts refuses manifest users outside Linux
// before asking.
func accountsMappable(sandbox.Accounts, bool) error {
	return errors.New("manifest users need Linux")
}

func (s *Sandbox) removeInUserNS() error {
	return errors.New("user namespaces exist on Linux only")
}

// cgroupCheck: memory and CPU limits need Linux cgroups.
func cgroupCheck(r sandbox.Resources) error {
	return errors.New("they need Linux cgroups")
}

func (s *Sandbox) stopInit() error { return nil }

// removeCgroup: there are no cgroups outside Linux.
func (s *Sandbox) removeCgroup() error { return nil }

func bindMounts(_ string, mounts []sandbox.Mount) error {
	if len(mounts) > 0 {
		return errors.New("storage mounts need Linux")
	}
	return nil
}

func unbindAll(string) error { return nil }
