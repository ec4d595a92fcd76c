//go:build !unix

package mcphost

// stopSelf does nothing here: the caller blocks, which hangs one call,
// not the whole server.
func stopSelf() {}

// canStopSelf says whether stopSelf hangs the whole server.
const canStopSelf = false
