package views

import (
	"encoding/json"
	"fmt"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/state"
)

// Output shows agentctl output.
type Output interface {
	// All shows every output, sensitive values hidden.
	All(outputs map[string]*state.Output) error
	// Value shows the value of the output name, given as JSON.
	Value(name string, value json.RawMessage) error
}

// NewOutput returns the output view of viewType: human, JSON or raw.
func NewOutput(viewType arguments.ViewType, view *View) Output {
	switch viewType {
	case arguments.ViewJSON:
		return outputJSON{view}
	case arguments.ViewRaw:
		return outputRaw{outputHuman{view}}
	}
	return outputHuman{view}
}

type outputHuman struct{ *View }

func (v outputHuman) All(outputs map[string]*state.Output) error {
	if len(outputs) == 0 {
		fmt.Fprintln(v.Stderr, "No outputs found: the configuration declares none, or no apply has produced them yet.")
		return nil
	}
	writeOutputList(v.Stdout, outputs)
	return nil
}

func (v outputHuman) Value(_ string, value json.RawMessage) error {
	_, err := fmt.Fprintln(v.Stdout, renderValue(value))
	return err
}

// outputJSON prints values exactly, as JSON.
type outputJSON struct{ *View }

func (v outputJSON) All(outputs map[string]*state.Output) error {
	out := map[string]any{}
	for n, o := range outputs {
		if o.Sensitive {
			out[n] = map[string]any{"sensitive": true}
		} else {
			out[n] = map[string]any{"sensitive": false, "value": o.Value}
		}
	}
	return writeJSON(v.Stdout, out)
}

func (v outputJSON) Value(_ string, value json.RawMessage) error {
	_, err := fmt.Fprintf(v.Stdout, "%s\n", termtext.JSON(value))
	return err
}

// outputRaw prints a string output's value exactly, with no quoting and
// no newline, for shell scripts. Without a NAME it lists the outputs as
// the human view does.
type outputRaw struct{ outputHuman }

func (v outputRaw) Value(name string, value json.RawMessage) error {
	var s string
	if json.Unmarshal(value, &s) != nil {
		return fmt.Errorf("-raw prints only string outputs; %q is not a string: use -json", name)
	}
	_, err := fmt.Fprint(v.Stdout, s)
	return err
}
