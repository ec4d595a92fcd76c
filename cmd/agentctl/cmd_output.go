package main

import (
	"context"
	"fmt"
	"sort"

	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
)

func outputCommand() *command {
	return &command{
		Name:       "output",
		ShortUsage: "agentctl output [options] [NAME]",
		ShortHelp:  "Show output values from the last apply.",
		LongHelp: "  With no NAME, prints every output (sensitive ones as <sensitive>). With\n" +
			"  NAME, prints that output's value, sensitive or not; -raw prints a string\n" +
			"  without quotes and -json prints JSON. Values are shown for a terminal,\n" +
			"  with control characters escaped (\\x1b, \\u202e); -raw and -json are for\n" +
			"  programs and print the value exactly.",
		Run: leaf(arguments.ParseOutput, (*meta).output),
	}
}

func (m *meta) output(ctx context.Context, args *arguments.Output) error {
	m.noColor = args.NoColor
	view := views.NewOutput(args.ViewType, m.view())
	b, st, err := readState(ctx, m.openStateBackend, args.Backend)
	if err != nil {
		return err
	}
	if args.Name == "" {
		return view.All(st.Outputs)
	}
	name := args.Name
	o := st.Outputs[name]
	if o == nil {
		if err := b.needConfig(args.Config, args.Vars, "output "+name); err != nil {
			return err
		}
		if _, declared := b.cfg.Outputs[name]; declared {
			return fmt.Errorf("output %q has no value yet: the runs it depends on have not completed; run agentctl apply", name)
		}
		return fmt.Errorf("output %q is not declared; declared outputs: %v", name, sortedStrings(b.cfg.Outputs))
	}
	if !o.Sensitive {
		return view.Value(name, o.Value)
	}
	// Sensitive values are never stored: evaluate it from the runs.
	if err := b.needConfig(args.Config, args.Vars, "a sensitive output"); err != nil {
		return err
	}
	vals, err := b.engine(0, nil, nil).Outputs(st)
	if err != nil {
		return err
	}
	unmarked, _ := vals[name].Value.Unmark()
	if !unmarked.IsWhollyKnown() {
		return fmt.Errorf("output %q has no value yet", name)
	}
	raw, err := ctyjson.Marshal(unmarked, unmarked.Type())
	if err != nil {
		return err
	}
	return view.Value(name, raw)
}

// sortedStrings returns the keys of a string-keyed map in order.
func sortedStrings[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
