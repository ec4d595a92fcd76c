package main

import (
	"context"
	"runtime"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/config"
	"github.com/peterbourgon/ff/v3/ffcli"
)

func versionCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewVersion(m.Stderr)
	return &ffcli.Command{
		Name:       "version",
		ShortUsage: "agentctl version [-json]",
		ShortHelp:  "Show the agentctl version.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			m.view().Version(views.VersionInfo{
				Version:  config.Version,
				Platform: runtime.GOOS + "_" + runtime.GOARCH,
			}, args.JSON)
			return nil
		},
	}
}
