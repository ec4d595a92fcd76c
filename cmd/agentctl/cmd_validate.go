package main

import (
	"context"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/builtin"
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
	cfg, diags := config.Load(args.Path, config.Options{Vars: args.Vars.Vars, VarFiles: args.Vars.VarFiles, Environ: m.Environ, Registry: builtin.Registry(), NoSecrets: true})
	view.Results(diags, files(cfg))
	if diags.HasErrors() {
		return exitCode(exitError)
	}
	return nil
}
