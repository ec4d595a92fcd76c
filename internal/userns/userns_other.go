//go:build !linux

package userns

import (
	"errors"
	"os/exec"
)

var errNotLinux = errors.New("user namespaces exist on Linux only")

// Lookup fails: user namespaces exist on Linux only.
func Lookup(need int) (Map, error) { return Map{}, errNotLinux }

// LookupUser fails: user namespaces exist on Linux only.
func LookupUser(uid string, need int) (Map, error) { return Map{}, errNotLinux }

// Start fails: user namespaces exist on Linux only.
func Start(cmd *exec.Cmd, m Map) error { return errNotLinux }

// Mapped fails: user namespaces exist on Linux only.
func Mapped(file string, ids []int) (initial bool, missing []int, err error) {
	return false, nil, errNotLinux
}
