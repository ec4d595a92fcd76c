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
)

// View writes to the command's output streams.
type View struct {
	Stdout io.Writer
	Stderr io.Writer
	Color  bool
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
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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

// ValidateResult shows the outcome of validate.
func (v *View) ValidateResult(diags hcl.Diagnostics, files map[string]*hcl.File, asJSON bool) {
	if asJSON {
		var b bytes.Buffer
		_ = diagfmt.WriteJSON(&b, diags, files)
		_, _ = v.Stdout.Write(termtext.JSON(b.Bytes()))
		return
	}
	v.Diagnostics(diags, files)
	if !diags.HasErrors() {
		if v.Color {
			fmt.Fprintf(v.Stdout, "\x1b[32m\x1b[1mSuccess!\x1b[0m The configuration is valid.\n")
		} else {
			fmt.Fprintf(v.Stdout, "Success! The configuration is valid.\n")
		}
	}
}

// VersionInfo is the document of version -json.
type VersionInfo struct {
	Version  string `json:"agentctl_version"`
	Platform string `json:"platform"`
}

// Version shows the version.
func (v *View) Version(info VersionInfo, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(v.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(info)
		return
	}
	fmt.Fprintf(v.Stdout, "agentctl v%s\non %s\n", info.Version, info.Platform)
}

// FmtFile reports a file whose formatting changed (or would change).
func (v *View) FmtFile(name string) {
	fmt.Fprintln(v.Stdout, termtext.Line(name))
}

// FmtDiff prints a unified diff, control characters of the files shown
// escaped.
func (v *View) FmtDiff(diff []byte) {
	fmt.Fprint(v.Stdout, termtext.Printable(string(diff)))
}

// Graph prints a rendered graph.
func (v *View) Graph(rendered string) {
	fmt.Fprint(v.Stdout, rendered)
}
