//go:build unix

package mcphost

import (
	"os"
	"syscall"
)

// stopSelf stops the whole process (SIGSTOP), as a hung server is: it
// reads and answers nothing. It may return before the process stops.
func stopSelf() { syscall.Kill(os.Getpid(), syscall.SIGSTOP) }

// canStopSelf says whether stopSelf hangs the whole server.
const canStopSelf = true
