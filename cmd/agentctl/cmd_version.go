package main

import (
	"context"
	"runtime"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/config"
)

func versionCommand() *command {
	return &command{
		Name:       "version",
		ShortUsage: "agentctl version [-json]",
		ShortHelp:  "Show the agentctl version.",
		Run:        leaf(arguments.ParseVersion, (*meta).version),
	}
}

func (m *meta) version(_ context.Context, args *arguments.Version) error {
	views.NewVersion(args.ViewType, m.view()).Version(views.VersionInfo{
		Version:  config.Version,
		Platform: runtime.GOOS + "_" + runtime.GOARCH,
	})
	return nil
}
