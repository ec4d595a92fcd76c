package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/builtin"
	"github.com/hashicorp/hcl/v2"
	"go.opentelemetry.io/otel/trace"
)

// meta is shared by every command: the output streams, the environment
// and the global flags.
type meta struct {
	Stdout  io.Writer
	Stderr  io.Writer
	Environ []string
	global  *arguments.Global
	// noColor is set by a command's own -no-color flag.
	noColor bool
	// log is the AGENTCTL_LOG logger (discarding when unset).
	log *slog.Logger
	// stdin reads standard input for the prompts of one command (the
	// plan's confirmation, then questions about tool calls), so no
	// prompt's buffer swallows another's answer.
	stdin *bufio.Reader
	// hold keeps the views' output back while the approval prompt waits
	// for an answer (terminalApprover), so that other runs' lines do not
	// come between the question and the answer.
	hold views.Hold
	// traces is the command's tracer provider (telemetry.New): spans are
	// exported when the OTEL_EXPORTER_OTLP_* variables say where, and
	// recorded nowhere otherwise.
	traces trace.TracerProvider
	// ctx is the command's context once its span is started: what a
	// process that continues the command's trace descends from.
	ctx context.Context
	// self is how to run this command again (meta.userNamespace); nil
	// when the command runs in-process (tests).
	self *selfCommand
}

// selfCommand is the agentctl process's own command line.
type selfCommand struct {
	exe  string
	args []string
	dir  string // the working directory before -chdir
}

// stdinReader returns the command's reader of standard input.
func (m *meta) stdinReader() *bufio.Reader {
	if m.stdin == nil {
		m.stdin = bufio.NewReader(os.Stdin)
	}
	return m.stdin
}

// view returns the streams and colors that the command's view (chosen
// from its arguments, as views.NewApply) writes with: through m.hold, so
// that an open prompt keeps them back. Commands set m.noColor from their
// -no-color flag first.
func (m *meta) view() *views.View {
	noColor := m.noColor || (m.global != nil && m.global.NoColor)
	return &views.View{
		Stdout: m.hold.Writer(m.Stdout),
		Stderr: m.hold.Writer(m.Stderr),
		Color:  views.Colorize(m.Stderr, noColor, m.Environ),
		Colors: views.NewColors(views.Colorize(m.Stdout, noColor, m.Environ)),
	}
}

// loadConfig loads the configuration at path (a file or a directory,
// relative to the working directory after -chdir).
func (m *meta) loadConfig(path string, vars arguments.Vars) (*config.Config, hcl.Diagnostics) {
	return config.Load(path, config.Options{Vars: vars.Vars, VarFiles: vars.VarFiles, Environ: m.Environ, Registry: builtin.Registry()})
}

// files returns the parsed files of cfg for diagnostic snippets.
func files(cfg *config.Config) map[string]*hcl.File {
	if cfg == nil {
		return nil
	}
	return cfg.Files
}
