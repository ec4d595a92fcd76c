package main

import (
	"context"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/peterbourgon/ff/v3/ffcli"
)

func validateCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewValidate(m.Stderr)
	return &ffcli.Command{
		Name:       "validate",
		ShortUsage: "agentctl validate [options] [PATH]",
		ShortHelp:  "Check whether the configuration is valid.",
		LongHelp: "  Validates the configuration in PATH (a .hcl file or a directory of them;\n" +
			"  default: the current directory) without contacting any provider:\n" +
			"  syntax, types, references, variables, the dependency graph and the\n" +
			"  sensitive-value rules.",
		FlagSet: fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			m.noColor = args.NoColor
			cfg, diags := m.loadConfig(args.Path, args.Vars)
			m.view().ValidateResult(diags, files(cfg), args.JSON)
			if diags.HasErrors() {
				return exitCode(exitError)
			}
			return nil
		},
	}
}
