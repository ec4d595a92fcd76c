//go:build !linux

package main

import "github.com/agentctl/agentctl/config"

// userNamespace: no sandbox asks for a user namespace outside Linux.
func (m *meta) userNamespace(cfg *config.Config) (ran bool, err error) { return false, nil }
