// Package tools implements the tools agents call (exec_command,
// apply_patch, view_image, command tools), named and shaped as in the
// Agents SDK, on top of a sandbox.Workspace.
package tools

import (
	"context"

	"github.com/agentctl/agentctl/engine/model"
)

// Output is what a tool call returns to the model.
type Output struct {
	Text   string
	Images []model.Image
}

// Tool is one function tool.
type Tool interface {
	Definition() model.Tool
	// Call runs the tool. A returned error is a tool failure: the runtime
	// sends its message back to the model as the tool output; it never
	// ends the run.
	Call(ctx context.Context, arguments string) (Output, error)
}
