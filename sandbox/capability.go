package sandbox

// Capability names an optional part of the sandbox contract. A provider
// that lacks one says so (CapabilityLacker) and refuses what needs it:
// at validation, where its provider type reports the configuration
// argument that asks for it, and at Create, with an error saying what it
// lacks and what to use instead; never by doing something else (running
// a command as another user, leaving a port unreachable).
// sandboxtest.TestSandbox checks both refusals for every capability a
// provider declares it lacks, and the capability itself for the others.
type Capability string

const (
	// CapabilityUsers is the manifest's users and groups (Spec.Accounts)
	// and the commands and processes run as one of them.
	CapabilityUsers Capability = "manifest users"
	// CapabilityPorts is Spec.Ports, reachable from the host at the URL
	// PortURL returns.
	CapabilityPorts Capability = "ports"
	// CapabilityProcesses is processes whose streams stay attached while
	// they run, on a terminal or not (ProcessStarter).
	CapabilityProcesses Capability = "processes with attached streams"
	// CapabilitySessionKill is ending, on a timeout, a cancellation or
	// Kill, the processes a command started in sessions of their own
	// (setsid), which left its process group. Without it only the
	// command's process group is ended.
	CapabilitySessionKill Capability = "ending processes that left the command's process group"
)

// CapabilityLacker is implemented by a Provider that lacks a capability
// of the contract, as it is configured and on this machine.
type CapabilityLacker interface {
	// Lacks returns the capabilities the provider lacks, each with the
	// reason, as its refusals say it.
	Lacks() map[Capability]string
}

// Lacks reports whether p lacks c, and why.
func Lacks(p Provider, c Capability) (why string, lacks bool) {
	l, ok := p.(CapabilityLacker)
	if !ok {
		return "", false
	}
	why, lacks = l.Lacks()[c]
	return why, lacks
}
