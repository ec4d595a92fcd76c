package views

import (
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/termtext"
)

// ToolCall shows the result of agentctl tool call as the model would
// read it, control characters escaped so it cannot drive the terminal.
type ToolCall struct{ *View }

// NewToolCall returns the tool call view.
func NewToolCall(view *View) *ToolCall { return &ToolCall{view} }

// Result prints the tool's output and a line per image it returned.
func (v *ToolCall) Result(out tools.Output) {
	fmt.Fprint(v.Stdout, termtext.Printable(out.Text))
	if out.Text != "" && !strings.HasSuffix(out.Text, "\n") {
		fmt.Fprintln(v.Stdout)
	}
	for _, img := range out.Images {
		fmt.Fprintf(v.Stdout, "[image %s, %d bytes]\n", termtext.Line(img.MediaType), len(img.Data))
	}
}

// Failed prints the tool's failure, as the model would read it.
func (v *ToolCall) Failed(err error) {
	fmt.Fprintln(v.Stderr, termtext.Printable(err.Error()))
}

// Exec passes a command's output through, byte for byte, as docker exec
// does: agentctl exec is a pipe, not a display.
type Exec struct{ *View }

// NewExec returns the exec view.
func NewExec(view *View) *Exec { return &Exec{view} }

// Output writes the command's standard output and error.
func (v *Exec) Output(stdout, stderr []byte) {
	_, _ = v.Stdout.Write(stdout)
	_, _ = v.Stderr.Write(stderr)
}
