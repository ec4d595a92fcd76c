package main

import (
	"context"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
)

func validateCommand() *command {
	return &command{
		Name:       "validate",
		ShortUsage: "agentctl validate [options] [PATH]",
		ShortHelp:  "Check whether the configuration is valid.",
		LongHelp: "  Validates the configuration in PATH (a .hcl file or a directory of them;\n" +
			"  default: the current directory) without contacting any provider:\n" +
			"  syntax, types, references, variables, the dependency graph and the\n" +
			"  sensitive-value rules.",
		Run: leaf(arguments.ParseValidate, (*meta).validate),
	}
}

func (m *meta) validate(_ context.Context, args *arguments.Validate) error {
	m.noColor = args.NoColor
	view := views.NewValidate(args.ViewType, m.view())
	cfg, diags := m.loadConfig(args.Path, args.Vars)
	view.Results(diags, files(cfg))
	if diags.HasErrors() {
		return exitCode(exitError)
	}
	return nil
}
