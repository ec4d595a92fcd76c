package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// FilesystemOptions are the filesystem capability's settings.
type FilesystemOptions struct {
	// Root is the workspace root inside the sandbox (the manifest root,
	// e.g. /workspace); absolute paths must lie under it. Empty refuses
	// absolute paths.
	Root string
	// MaxImageBytes caps the images view_image returns; 0 means
	// DefaultMaxImageBytes.
	MaxImageBytes int64
}

// ApplyPatchTool is the apply_patch tool of the filesystem capability.
type ApplyPatchTool struct {
	ws   *sandbox.Workspace
	opts FilesystemOptions
}

// NewApplyPatch returns the apply_patch tool editing files in ws.
func NewApplyPatch(ws *sandbox.Workspace, opts FilesystemOptions) *ApplyPatchTool {
	return &ApplyPatchTool{ws: ws, opts: opts}
}

// ApplyPatchGrammar is the Lark grammar of the V4A patch format, for
// providers that offer apply_patch as a freeform (custom) tool. Call
// accepts the raw patch text such a tool produces as its arguments.
const ApplyPatchGrammar = `start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change

filename: /(.+)/
add_line: "+" /(.*)/ LF -> line

change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF

%import common.LF`

// ApplyPatchDescription tells the model the patch format.
const ApplyPatchDescription = `Use the ` + "`apply_patch`" + ` tool to edit files. Pass the whole patch as the "input" string.
The patch format is a small, file-oriented diff that is easy to parse and safe to apply:

*** Begin Patch
[ one or more file sections ]
*** End Patch

Each file section starts with one of three headers:

*** Add File: <path> - create a file (an existing one is replaced). Every following line starts with + and is a line of the new file.
*** Delete File: <path> - delete a file. Nothing follows.
*** Update File: <path> - change a file in place, optionally renamed by a following line "*** Move to: <new path>".

An update has one or more hunks, each introduced by @@ (optionally followed by a line of the file, such as a class or function header, that locates the hunk). Each hunk line starts with a space (context, unchanged), - (removed) or + (added).

Show about 3 lines of context above and below each change, without repeating lines shared with the previous hunk. When that is not unique, add "@@ <line>" headers, one per line, naming the enclosing class, then the function, and so on.
"*** End of File" after a hunk anchors it at the end of the file.

Example:

*** Begin Patch
*** Add File: hello.txt
+Hello world
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-print("Hi")
+print("Hello, world!")
*** Delete File: obsolete.txt
*** End Patch

Remember:
- Every section needs its header (Add/Delete/Update).
- Prefix every new line with + even when creating a file.
- Paths are relative to the workspace root, never absolute.`

const applyPatchSchema = `{
  "type": "object",
  "properties": {
    "input": {"type": "string", "description": "The entire contents of the apply_patch command"}
  },
  "required": ["input"],
  "additionalProperties": false
}`

// Definition implements Tool: a function tool taking {"input": patch}.
func (t *ApplyPatchTool) Definition() model.Tool {
	return model.Tool{
		Name:        "apply_patch",
		Description: ApplyPatchDescription,
		Parameters:  json.RawMessage(applyPatchSchema),
	}
}

// Call implements Tool. arguments is one of: {"input": "<V4A patch>"}
// (the function form), a JSON operation form (an apply_patch_call
// operation {"type", "path", "diff"}, {"operation": ...},
// {"operations": [...]} or an array), or the raw patch text (the freeform
// form).
func (t *ApplyPatchTool) Call(ctx context.Context, arguments string) (Output, error) {
	patch, err := patchFromArguments(arguments)
	if err != nil {
		return Output{}, err
	}
	out, err := ApplyPatch(ctx, t.ws.Sandbox, t.opts.Root, patch)
	if err != nil {
		return Output{}, scrubErr(t.ws, fmt.Errorf("apply_patch: %w", t.ws.Unavailable(ctx, err)))
	}
	return Output{Text: t.ws.Scrub.String(out)}, nil
}

func patchFromArguments(arguments string) (string, error) {
	trimmed := strings.TrimSpace(arguments)
	if !strings.HasPrefix(trimmed, "{") {
		return arguments, nil // raw patch text, or a JSON array of operations
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal([]byte(trimmed), &probe); err != nil {
		return "", fmt.Errorf("apply_patch: invalid arguments: %v: send {\"input\": \"*** Begin Patch\\n...\\n*** End Patch\\n\"}", err)
	}
	raw, ok := probe["input"]
	if !ok {
		return arguments, nil // JSON operation form
	}
	for k := range probe {
		if k != "input" {
			return "", fmt.Errorf("apply_patch: invalid arguments: unknown field %q: the only field is \"input\"", k)
		}
	}
	var input string
	if err := json.Unmarshal(raw, &input); err != nil {
		return "", fmt.Errorf("apply_patch: invalid arguments: \"input\" must be a string holding the whole patch")
	}
	return input, nil
}

// scrubbedError carries a scrubbed message while keeping the original
// error chain for errors.Is.
type scrubbedError struct {
	msg string
	err error
}

func (e scrubbedError) Error() string { return e.msg }
func (e scrubbedError) Unwrap() error { return e.err }

// scrubErr removes sensitive values from err's message.
func scrubErr(ws *sandbox.Workspace, err error) error {
	msg := ws.Scrub.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return scrubbedError{msg: msg, err: err}
}
