package sandbox

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/agentctl/agentctl/internal/filekind"
)

// ErrNotRegular is returned (wrapped) when a file operation meets a
// workspace entry that is not a regular file: a FIFO, socket or device,
// which a command in the sandbox can create and which would block or
// misbehave if opened. File tools read and write regular files only.
var ErrNotRegular = errors.New("not a regular file")

// notRegularError is the message the model reads when a file tool meets
// a special file.
type notRegularError struct {
	op, path string
	mode     fs.FileMode
}

func (e *notRegularError) Error() string {
	msg := fmt.Sprintf("%s %s: it is %s, not a regular file; file tools only read and write regular files", e.op, e.path, FileTypeName(e.mode))
	if e.op == "write" {
		msg += " (delete it first to replace it with one)"
	}
	return msg
}

func (e *notRegularError) Is(target error) bool { return target == ErrNotRegular }

// NotRegularError is the error for operation op ("read", "write") on
// workspace path p, which is of type mode and not a regular file. It
// wraps ErrNotRegular.
func NotRegularError(op, p string, mode fs.FileMode) error {
	return &notRegularError{op: op, path: p, mode: mode}
}

// FileTypeName names the type of a file mode for messages, e.g. "a named
// pipe (FIFO)".
func FileTypeName(mode fs.FileMode) string { return filekind.Name(mode) }
