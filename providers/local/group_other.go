//go:build !unix

package local

import (
	"os"
	"syscall"
)

func groupSysProcAttr() *syscall.SysProcAttr { return nil }

// killProcessGroup kills the command; without process groups its
// children may survive.
func killProcessGroup(p *os.Process) { p.Kill() }
