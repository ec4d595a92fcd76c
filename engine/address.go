package engine

import "github.com/agentctl/agentctl/addrs"

// capKey turns capability.TYPE.NAME into the Capabilities map key. An
// address that does not parse (the configuration never makes one) is
// returned as it is, so the lookup finds nothing.
func capKey(addr string) string {
	a, err := addrs.ParseCapability(addr)
	if err != nil {
		return addr
	}
	return a.Key()
}

// providerKey turns provider.TYPE[.ALIAS] into the Providers map key, as
// capKey does.
func providerKey(addr string) string {
	a, err := addrs.ParseProvider(addr)
	if err != nil {
		return addr
	}
	return a.Name()
}

// agentAddr is the address of the agent named name.
func agentAddr(name string) string { return addrs.Agent{Name: name}.String() }
