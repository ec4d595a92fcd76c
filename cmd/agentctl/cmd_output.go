package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/internal/termtext"
)

func outputCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewInspect("output", m.Stderr)
	return &ffcli.Command{
		Name:       "output",
		ShortUsage: "agentctl output [options] [NAME]",
		ShortHelp:  "Show output values from the last apply.",
		LongHelp: "  With no NAME, prints every output (sensitive ones as <sensitive>). With\n" +
			"  NAME, prints that output's value, sensitive or not; -raw prints a string\n" +
			"  without quotes and -json prints JSON. Values are shown for a terminal,\n" +
			"  with control characters escaped (\\x1b, \\u202e); -raw and -json are for\n" +
			"  programs and print the value exactly.",
		FlagSet: fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			if len(args.Args) > 1 {
				return fmt.Errorf("output takes at most one NAME")
			}
			b, st, err := readState(m.openStateBackend, args)
			if err != nil {
				return err
			}
			if len(args.Args) == 0 {
				if args.JSON {
					out := map[string]any{}
					for n, o := range st.Outputs {
						if o.Sensitive {
							out[n] = map[string]any{"sensitive": true}
						} else {
							out[n] = map[string]any{"sensitive": false, "value": o.Value}
						}
					}
					return writeJSON(m.Stdout, out)
				}
				if len(st.Outputs) == 0 {
					fmt.Fprintln(m.Stderr, "No outputs found: the configuration declares none, or no apply has produced them yet.")
					return nil
				}
				names := make([]string, 0, len(st.Outputs))
				for n := range st.Outputs {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					o := st.Outputs[n]
					if o.Sensitive {
						fmt.Fprintf(m.Stdout, "%s = <sensitive>\n", n)
					} else {
						fmt.Fprintf(m.Stdout, "%s = %s\n", n, renderJSONValue(o.Value))
					}
				}
				return nil
			}
			name := args.Args[0]
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
			raw := json.RawMessage(o.Value)
			if o.Sensitive {
				if err := b.needConfig(args.Config, args.Vars, "a sensitive output"); err != nil {
					return err
				}
				vals, err := b.engine(0, nil, nil).Outputs(st)
				if err != nil {
					return err
				}
				v := vals[name].Value
				unmarked, _ := v.Unmark()
				if !unmarked.IsWhollyKnown() {
					return fmt.Errorf("output %q has no value yet", name)
				}
				raw, err = ctyjson.Marshal(unmarked, unmarked.Type())
				if err != nil {
					return err
				}
				if args.Raw && unmarked.Type() == cty.String {
					fmt.Fprint(m.Stdout, unmarked.AsString())
					return nil
				}
			}
			if args.JSON {
				_, err := fmt.Fprintf(m.Stdout, "%s\n", termtext.JSON(raw))
				return err
			}
			if args.Raw {
				var s string
				if json.Unmarshal(raw, &s) != nil {
					return fmt.Errorf("-raw prints only string outputs; %q is not a string: use -json", name)
				}
				fmt.Fprint(m.Stdout, s)
				return nil
			}
			fmt.Fprintln(m.Stdout, renderJSONValue(raw))
			return nil
		},
	}
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
