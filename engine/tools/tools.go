// Package tools implements the tools agents call (exec_command,
// apply_patch, view_image, command tools), named and shaped as in the
// Agents SDK, on top of a sandbox.Workspace.
package tools

import (
	"context"
	"errors"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// Output is what a tool call returns to the model.
type Output struct {
	Text   string
	Images []model.Image
	// ExitCode is the exit status of the command a tool ran, when it
	// finished (exec_command, command tools); traces record it.
	ExitCode *int
}

// Tool is one function tool.
type Tool interface {
	Definition() model.Tool
	// Call runs the tool. A returned error is a tool failure: the runtime
	// sends its message back to the model as the tool output, and the run
	// goes on. The exception is an error wrapping a
	// *sandbox.UnavailableError (the sandbox stopped, vanished or could
	// not be reached during the call): that ends the run, resumably, with
	// the call unrecorded. Tools classify the errors of the sandbox
	// operations they make with Workspace.Unavailable.
	Call(ctx context.Context, arguments string) (Output, error)
}

// isUnavailable reports whether err says the sandbox failed under a call.
func isUnavailable(err error) bool {
	_, ok := errors.AsType[*sandbox.UnavailableError](err)
	return ok
}
