package views

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/state"
)

// writeOutputs prints the root outputs for a person, after an apply or
// in show's summary of the state.
func writeOutputs(w io.Writer, outputs map[string]*state.Output) {
	if len(outputs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nOutputs:")
	fmt.Fprintln(w)
	writeOutputList(w, outputs)
}

// writeOutputList prints one NAME = VALUE line per output, in order,
// sensitive values as <sensitive>.
func writeOutputList(w io.Writer, outputs map[string]*state.Output) {
	for _, n := range slices.Sorted(maps.Keys(outputs)) {
		o := outputs[n]
		if o.Sensitive {
			fmt.Fprintf(w, "%s = <sensitive>\n", n)
			continue
		}
		fmt.Fprintf(w, "%s = %s\n", n, renderValue(o.Value))
	}
}

// renderValue renders a value for a person: a string as an HCL-style
// string (heredoc when it has several lines), anything else as indented
// JSON, with control and format characters shown escaped (the value may
// hold model or tool output). Programs read -raw and -json instead.
func renderValue(raw json.RawMessage) string {
	return termtext.Printable(valueText(raw))
}

func valueText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.Contains(strings.TrimRight(s, "\n"), "\n") {
			return "<<EOT\n" + strings.TrimRight(s, "\n") + "\nEOT"
		}
		b, _ := json.Marshal(s)
		return string(b)
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
