//go:build unix

package local

import (
	"os"
	"syscall"
)

// killProcessGroup kills the process group an unisolated command leads.
func killProcessGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
