// Package views renders command results for people and for machines,
// apart from argument parsing and from the engine.
package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentctl/agentctl/config/diagfmt"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/hashicorp/hcl/v2"
	"golang.org/x/term"
)

// View is what every command's view writes with: the output streams and
// whether to color them. A command's view (NewValidate, NewApply, ...)
// wraps it; the command chooses that view once, from its arguments.
type View struct {
	Stdout io.Writer
	Stderr io.Writer
	// Color is whether diagnostics on Stderr are colored.
	Color bool
	// Colors is the palette of what is printed on Stdout, empty when it
	// is not a terminal or color is off.
	Colors Colors
}

// Colorize reports whether output to w should be colored: not when
// disabled, when NO_COLOR is set, or when w is not a terminal.
func Colorize(w io.Writer, noColor bool, environ []string) bool {
	if noColor {
		return false
	}
	for _, kv := range environ {
		if len(kv) > 9 && kv[:9] == "NO_COLOR=" {
			return false
		}
	}
	f, ok := w.(*os.File)
	return ok && IsTerminal(f)
}

// IsTerminal reports whether f is a terminal: one the terminal driver
// answers for (isatty), not merely a character device such as /dev/null.
// Every check for a terminal (colors, prompts, agentctl chat, exec -t)
// is this one.
func IsTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}

// Diagnostics prints errors to stderr and warnings to stdout, as
// Terraform does.
func (v *View) Diagnostics(diags hcl.Diagnostics, files map[string]*hcl.File) {
	for _, d := range diags {
		w := v.Stderr
		if d.Severity == hcl.DiagWarning {
			w = v.Stdout
		}
		fmt.Fprint(w, diagfmt.Human(d, files, v.Color))
	}
}

// Error prints a one-line error for problems that have no source range.
func (v *View) Error(err error) {
	v.Diagnostics(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: capitalize(err.Error())}}, nil)
}

// writeJSON prints v as indented JSON for programs: exact values, with
// the characters that could drive a terminal JSON-escaped.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(termtext.JSON(b.Bytes()))
	return err
}

// capitalize upper-cases the first letter of a message, unless it starts
// with an address (run.x, sandbox.y, ...), which must stay pasteable.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	if word, _, _ := strings.Cut(s, " "); strings.Contains(word, ".") {
		return s // starts with an address such as run.x: keep it as written
	}
	if s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}
