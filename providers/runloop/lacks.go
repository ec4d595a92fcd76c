package runloop

import "github.com/agentctl/agentctl/sandbox"

// Lacks implements sandbox.CapabilityLacker: a devbox runs every command
// as its one user, so it has no manifest users; and Runloop's executions
// return their output when they end, so it has no processes with
// attached streams, on a terminal or not (docs/runloop-provider.md).
// DecodeSandbox refuses the former at the manifest; the latter are
// refused when a process is started (sandbox.UnsupportedError).
func (p *Provider) Lacks() map[sandbox.Capability]string {
	return map[sandbox.Capability]string{
		sandbox.CapabilityUsers:     noUsers,
		sandbox.CapabilityProcesses: noProcesses,
	}
}

// Why Runloop lacks what it lacks, as Lacks, DecodeSandbox and Create
// say it.
const (
	noUsers     = "a Runloop devbox runs every command as its one user"
	noProcesses = "Runloop's executions return their output only when they end, so a process's streams cannot stay attached while it runs"
)

var _ sandbox.CapabilityLacker = (*Provider)(nil)
