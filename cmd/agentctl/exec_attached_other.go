//go:build !linux

package main

import (
	"context"
	"errors"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/sandbox"
)

// execAttached: exec -i and -t drive the terminal through Linux ioctls.
func (m *meta) execAttached(context.Context, *sandbox.Workspace, *arguments.Exec) (int, error) {
	return 0, errors.New("exec -i and -t need Linux here; run the command without them")
}
