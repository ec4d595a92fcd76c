package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/peterbourgon/ff/v3/ffcli"
)

// Exit codes, as Terraform's.
const (
	exitOK    = 0
	exitError = 1
	// exitFmtCheck is fmt -check's status when files need formatting.
	exitFmtCheck = 3
)

// exitCode carries a command's exit status through ffcli.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// command is what every subcommand file provides: a constructor that
// builds its ffcli command from the shared meta.
type command func(m *meta) *ffcli.Command

// commands lists the subcommands; add new ones here.
var commands = []command{
	validateCommand,
	fmtCommand,
	graphCommand,
	planCommand,
	applyCommand,
	destroyCommand,
	showCommand,
	outputCommand,
	stateCommand,
	forceUnlockCommand,
	execCommand,
	toolCommand,
	versionCommand,
}

// run is the whole program: it parses args, runs one command and returns
// the exit status. main calls it; tests call it in-process.
func run(args []string, stdout, stderr io.Writer, environ []string) int {
	m := &meta{Stdout: stdout, Stderr: stderr, Environ: environ, log: newLogger(environ, stderr)}
	rootFS := flag.NewFlagSet("agentctl", flag.ContinueOnError)
	rootFS.SetOutput(stderr)
	global := arguments.NewGlobal(rootFS)
	m.global = global

	var subs []*ffcli.Command
	for _, c := range commands {
		subs = append(subs, c(m))
	}
	root := &ffcli.Command{
		Name:        "agentctl",
		ShortUsage:  "agentctl [-chdir=DIR] [-no-color] <command> [args]",
		ShortHelp:   "Terraform for sandboxed AI agents.",
		FlagSet:     rootFS,
		Subcommands: subs,
		Exec: func(ctx context.Context, args []string) error {
			if global.Version {
				return versionCommand(m).Exec(ctx, nil)
			}
			if len(args) > 0 {
				var names []string
				for _, s := range subs {
					names = append(names, s.Name)
				}
				return fmt.Errorf("unknown command %q: the commands are %s", args[0], strings.Join(names, ", "))
			}
			return flag.ErrHelp
		},
	}
	root.UsageFunc = usage
	for _, s := range subs {
		s.UsageFunc = usage
	}

	if err := root.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		m.view().Error(err)
		return exitError
	}
	if global.Chdir != "" {
		if err := os.Chdir(global.Chdir); err != nil {
			m.view().Error(fmt.Errorf("-chdir: %w; give an existing directory", err))
			return exitError
		}
	}
	err := root.Run(context.Background())
	var code exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stderr, usage(root))
		return exitOK
	default:
		m.view().Error(err)
		return exitError
	}
}

// usage renders a command's help in the style of Terraform.
func usage(c *ffcli.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n", c.ShortUsage)
	if c.LongHelp != "" {
		fmt.Fprintf(&b, "\n%s\n", c.LongHelp)
	} else if c.ShortHelp != "" {
		fmt.Fprintf(&b, "\n  %s\n", c.ShortHelp)
	}
	if len(c.Subcommands) > 0 {
		b.WriteString("\nCommands:\n")
		for _, s := range c.Subcommands {
			fmt.Fprintf(&b, "  %-10s %s\n", s.Name, s.ShortHelp)
		}
	}
	if c.FlagSet != nil {
		first := true
		c.FlagSet.VisitAll(func(f *flag.Flag) {
			if first {
				b.WriteString("\nOptions:\n")
				first = false
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(&b, "  -%-14s %s%s\n", f.Name, f.Usage, def)
		})
	}
	return b.String()
}
