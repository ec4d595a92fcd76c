package main

import (
	"context"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/graph"
)

func graphCommand() *command {
	return &command{
		Name:       "graph",
		ShortUsage: "agentctl graph [-type=plan|agents] [-format=dot|mermaid] [PATH]",
		ShortHelp:  "Show the dependency graph or the agent graph.",
		LongHelp: "  -type=plan (the default) shows runs and sandboxes and what each depends\n" +
			"  on, with implied edges removed. -type=agents shows agents with their\n" +
			"  handoff and agent-tool edges (which may form cycles).",
		Run: leaf(arguments.ParseGraph, (*meta).drawGraph),
	}
}

func (m *meta) drawGraph(_ context.Context, args *arguments.Graph) error {
	m.noColor = args.NoColor
	view := views.NewGraph(m.view())
	cfg, diags := m.loadConfig(args.Path, args.Vars)
	if diags.HasErrors() {
		view.Diagnostics(diags, files(cfg))
		return exitCode(exitError)
	}
	var g *graph.Graph
	name := args.Type
	if args.Type == "agents" {
		g = cfg.AgentGraph()
	} else {
		dg, _ := cfg.DependencyGraph()
		g = dg.TransitiveReduction()
	}
	if args.Format == "mermaid" {
		view.Graph(g.Mermaid())
	} else {
		view.Graph(g.DOT(name))
	}
	return nil
}
