//go:build unix

package local

import "github.com/agentctl/agentctl/sandbox"

// probeAccounts are the accounts Lacks asks about: one user with an id
// of its own, which is what any manifest user needs mapped.
var probeAccounts = sandbox.Accounts{Users: []sandbox.User{{Name: "probe", UID: sandbox.FirstAutoID}}}

// Lacks says what the provider cannot do as configured on this machine
// (sandbox.CapabilityLacker): manifest users with isolation "none",
// outside Linux, or where this process cannot map their ids (an ordinary
// user's process not started in a user namespace of its own); and with
// isolation "none", ending a command's processes that left its process
// group, since only the group is killed (docs/local-provider.md). Ports
// need network "host" on a namespaced sandbox, which is the sandbox's
// setting, not something the provider lacks.
func (p *Provider) Lacks() map[sandbox.Capability]string {
	lacks := map[sandbox.Capability]string{}
	if err := checkAccounts(p.opts.Isolation, probeAccounts, false); err != nil {
		lacks[sandbox.CapabilityUsers] = err.Error()
	}
	if p.opts.Isolation == IsolationNone {
		lacks[sandbox.CapabilitySessionKill] = `with isolation "none" a command runs in a process group of its own on this machine, and a process that leaves the group (setsid) escapes its timeout`
	}
	return lacks
}

var _ sandbox.CapabilityLacker = (*Provider)(nil)
