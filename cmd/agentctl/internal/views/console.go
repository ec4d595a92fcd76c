package views

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/agentctl/agentctl/internal/termtext"
)

// Console shows the results of agentctl console.
type Console struct{ *View }

// NewConsole returns the console view.
func NewConsole(view *View) Console { return Console{view} }

// Prompt shows the interactive prompt.
func (v Console) Prompt() {
	fmt.Fprint(v.Stdout, "> ")
}

// Value shows one expression's value.
func (v Console) Value(val cty.Value) error {
	_, err := fmt.Fprintln(v.Stdout, termtext.Printable(ConsoleValue(val)))
	return err
}

// ConsoleValue renders a value as agentctl console prints it, as
// terraform console does: HCL syntax, "(known after apply)" for what is
// not known until runs complete and "(sensitive value)" for sensitive
// values.
func ConsoleValue(val cty.Value) string {
	var b strings.Builder
	writeConsoleValue(&b, val, "")
	return b.String()
}

func writeConsoleValue(w io.StringWriter, val cty.Value, indent string) {
	switch {
	case val.IsMarked():
		w.WriteString("(sensitive value)")
	case !val.IsKnown():
		w.WriteString("(known after apply)")
	case val.IsNull():
		w.WriteString("null")
	case val.Type() == cty.String:
		writeConsoleString(w, val.AsString(), indent)
	case val.Type() == cty.Number:
		w.WriteString(val.AsBigFloat().Text('f', -1))
	case val.Type() == cty.Bool:
		w.WriteString(fmt.Sprint(val.True()))
	case val.Type().IsListType() || val.Type().IsTupleType() || val.Type().IsSetType():
		writeConsoleList(w, val, indent)
	case val.Type().IsMapType() || val.Type().IsObjectType():
		writeConsoleMap(w, val, indent)
	default:
		w.WriteString(val.GoString())
	}
}

// writeConsoleString writes a string quoted, or as a heredoc when it has
// several lines (indented, <<-EOT, inside a list or an object).
func writeConsoleString(w io.StringWriter, s, indent string) {
	trimmed := strings.TrimRight(s, "\n")
	if !strings.Contains(trimmed, "\n") {
		w.WriteString(fmt.Sprintf("%q", s))
		return
	}
	if indent == "" {
		w.WriteString("<<EOT\n")
	} else {
		w.WriteString("<<-EOT\n")
	}
	for _, line := range strings.Split(trimmed, "\n") {
		w.WriteString(indent + line + "\n")
	}
	w.WriteString(indent + "EOT")
}

func writeConsoleList(w io.StringWriter, val cty.Value, indent string) {
	if val.LengthInt() == 0 {
		w.WriteString("[]")
		return
	}
	w.WriteString("[\n")
	for it := val.ElementIterator(); it.Next(); {
		_, e := it.Element()
		w.WriteString(indent + "  ")
		writeConsoleValue(w, e, indent+"  ")
		w.WriteString(",\n")
	}
	w.WriteString(indent + "]")
}

func writeConsoleMap(w io.StringWriter, val cty.Value, indent string) {
	if val.LengthInt() == 0 {
		w.WriteString("{}")
		return
	}
	m := val.AsValueMap()
	keys := make([]string, 0, len(m))
	width := 0
	for k := range m {
		keys = append(keys, k)
		width = max(width, len(fmt.Sprintf("%q", k)))
	}
	sort.Strings(keys)
	w.WriteString("{\n")
	for _, k := range keys {
		w.WriteString(fmt.Sprintf("%s  %-*q = ", indent, width, k))
		writeConsoleValue(w, m[k], indent+"  ")
		w.WriteString("\n")
	}
	w.WriteString(indent + "}")
}

// Newline ends the prompt's line when input ends at the prompt.
func (v Console) Newline() {
	fmt.Fprintln(v.Stdout)
}
