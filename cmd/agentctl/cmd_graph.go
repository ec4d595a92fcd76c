package main

import (
	"context"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/graph"
	"github.com/peterbourgon/ff/v3/ffcli"
)

func graphCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewGraph(m.Stderr)
	return &ffcli.Command{
		Name:       "graph",
		ShortUsage: "agentctl graph [-type=plan|agents] [-format=dot|mermaid] [PATH]",
		ShortHelp:  "Show the dependency graph or the agent graph.",
		LongHelp: "  -type=plan (the default) shows runs and sandboxes and what each depends\n" +
			"  on, with implied edges removed. -type=agents shows agents with their\n" +
			"  handoff and agent-tool edges (which may form cycles).",
		FlagSet: fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			m.noColor = args.NoColor
			cfg, diags := m.loadConfig(args.Path, args.Vars)
			if diags.HasErrors() {
				m.view().Diagnostics(diags, files(cfg))
				return exitCode(exitError)
			}
			var g *graph.Graph
			name := "agents"
			if args.Type == "agents" {
				g = cfg.AgentGraph()
			} else {
				name = "plan"
				dg, _ := cfg.DependencyGraph()
				g = dg.TransitiveReduction()
			}
			if args.Format == "mermaid" {
				m.view().Graph(g.Mermaid())
			} else {
				m.view().Graph(g.DOT(name))
			}
			return nil
		},
	}
}
