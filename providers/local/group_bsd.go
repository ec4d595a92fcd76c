//go:build unix && !linux

package local

import "syscall"

// groupSysProcAttr puts an unisolated command in its own process group.
func groupSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
