package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"go.opentelemetry.io/otel/codes"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/internal/telemetry"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/providers/registry"
)

// Exit codes, as Terraform's.
const (
	exitOK    = 0
	exitError = 1
	// exitFmtCheck is fmt -check's status when files need formatting.
	exitFmtCheck = 3
)

// exitCode carries a command's exit status.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// argumentError carries what a command's arguments.ParseX found wrong.
type argumentError struct{ diags hcl.Diagnostics }

func (e *argumentError) Error() string { return e.diags.Error() }

// command is one agentctl command: its help text, and either what it runs
// or its subcommands.
type command struct {
	Name       string
	ShortUsage string
	ShortHelp  string
	LongHelp   string
	// Subcommands are the commands under this one (state list, ...).
	Subcommands []*command
	// Run parses args, those after the command's name, and runs the
	// command. A command with subcommands runs it when none is named.
	Run func(ctx context.Context, m *meta, args []string) error
}

// leaf makes a command's Run from its argument parser and its body: the
// arguments are parsed into their typed value, and any problem is
// reported before the body runs.
func leaf[A any](parse func([]string) (*A, hcl.Diagnostics), body func(*meta, context.Context, *A) error) func(context.Context, *meta, []string) error {
	return func(ctx context.Context, m *meta, args []string) error {
		a, diags := parse(args)
		if diags.HasErrors() {
			return &argumentError{diags}
		}
		return body(m, ctx, a)
	}
}

// sub returns the subcommand called name (in any case), or nil.
func (c *command) sub(name string) *command {
	for _, s := range c.Subcommands {
		if strings.EqualFold(name, s.Name) {
			return s
		}
	}
	return nil
}

// commands lists the subcommands; add new ones here.
func commands() []*command {
	return []*command{
		initCommand(),
		validateCommand(),
		fmtCommand(),
		graphCommand(),
		planCommand(),
		applyCommand(),
		destroyCommand(),
		showCommand(),
		outputCommand(),
		consoleCommand(),
		queryCommand(),
		importCommand(),
		stateCommand(),
		approveCommand(),
		rejectCommand(),
		forceUnlockCommand(),
		execCommand(),
		chatCommand(),
		toolCommand(),
		testCommand(),
		versionCommand(),
	}
}

// run is the whole program: it parses args, runs one command and returns
// the exit status. Tests call it in-process; main calls runMain.
func run(args []string, stdout, stderr io.Writer, environ []string) int {
	return runWith(&meta{Stdout: stdout, Stderr: stderr, Environ: environ}, args)
}

// runMain is run for the agentctl process itself, which may run the
// command again in a user namespace of its own (meta.userNamespace).
func runMain(args []string) int {
	m := &meta{Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ()}
	if exe, err := os.Executable(); err == nil {
		if dir, err := os.Getwd(); err == nil {
			m.self = &selfCommand{exe: exe, args: args, dir: dir}
		}
	}
	return runWith(m, args)
}

func runWith(m *meta, args []string) int {
	stderr, environ := m.Stderr, m.Environ
	m.log = newLogger(environ, stderr)
	root := &command{
		Name:        "agentctl",
		ShortUsage:  "agentctl [-chdir=DIR] [-no-color] <command> [args]",
		ShortHelp:   "Terraform for sandboxed AI agents.",
		Subcommands: commands(),
	}
	global, rest, diags := arguments.ParseGlobal(args)
	m.global = global
	if diags.HasErrors() {
		return m.exit(root, &argumentError{diags})
	}
	if global.Chdir != "" {
		if err := os.Chdir(global.Chdir); err != nil {
			m.view().Error(fmt.Errorf("-chdir: %w; give an existing directory", err))
			return exitError
		}
	}
	// The command's spans join the trace TRACEPARENT names, if any.
	ctx := telemetry.ContextFromEnviron(context.Background(), environ)
	m.ctx = ctx
	tp, err := telemetry.New(ctx, environ, config.Version)
	if err != nil {
		m.view().Error(fmt.Errorf("tracing: %w", err))
		return exitError
	}
	m.traces = tp
	defer func() {
		// The spans still buffered are exported before the process ends,
		// within a bounded time; a failed export is reported, not lost
		// silently.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			fmt.Fprintf(stderr, "Warning: %s\n", termtext.Printable(err.Error()))
		}
	}()
	if global.Version {
		c := root.sub("version")
		return m.exit(c, c.Run(ctx, m, nil))
	}
	if len(rest) == 0 {
		fs := flag.NewFlagSet(root.Name, flag.ContinueOnError)
		arguments.NewGlobal(fs)
		fmt.Fprint(stderr, usage(root, fs))
		return exitOK
	}
	c := root.sub(rest[0])
	if c == nil {
		names := make([]string, len(root.Subcommands))
		for i, s := range root.Subcommands {
			names[i] = s.Name
		}
		m.view().Error(fmt.Errorf("unknown command %q.%s The commands are %s", rest[0], didYouMean(rest[0], names), strings.Join(names, ", ")))
		return exitError
	}
	c, err = m.dispatch(ctx, c, rest[1:])
	return m.exit(c, err)
}

// dispatch runs c with args, or the subcommand args name. It returns the
// command that ran, whose usage goes with its argument errors.
func (m *meta) dispatch(ctx context.Context, c *command, args []string) (*command, error) {
	if len(c.Subcommands) == 0 {
		return c, m.traced(ctx, c, args)
	}
	rest, diags := arguments.ParseGroup(c.Name, args)
	if diags.HasErrors() {
		return c, &argumentError{diags}
	}
	if len(rest) > 0 {
		if s := c.sub(rest[0]); s != nil {
			return m.dispatch(ctx, s, rest[1:])
		}
	}
	return c, m.traced(ctx, c, rest)
}

// traced runs c in the command's root span (named for the command), the
// parent of the engine's spans.
func (m *meta) traced(ctx context.Context, c *command, args []string) error {
	if m.traces == nil {
		return c.Run(ctx, m, args)
	}
	ctx, span := m.traces.Tracer("github.com/agentctl/agentctl/cmd/agentctl").Start(ctx, "agentctl "+c.Name)
	m.ctx = ctx
	err := c.Run(ctx, m, args)
	if err != nil {
		span.SetStatus(codes.Error, "command failed")
	}
	span.End()
	return err
}

// exit reports the outcome of command c and returns the exit status.
func (m *meta) exit(c *command, err error) int {
	var code exitCode
	var argErr *argumentError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &argErr):
		if u, ok := arguments.UsageOf(argErr.diags); ok {
			fmt.Fprintln(m.Stderr, usage(c, u.Flags))
			if u.Help {
				return exitOK
			}
		}
		m.view().Diagnostics(argErr.diags, nil)
		return exitError
	default:
		m.view().Error(err)
		return exitError
	}
}

// usage renders a command's help in the style of Terraform; fs are its
// flags.
func usage(c *command, fs *flag.FlagSet) string {
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
	if fs != nil {
		first := true
		fs.VisitAll(func(f *flag.Flag) {
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

// didYouMean is " Did you mean "NAME"?" for the command closest to
// given (a few edits away, or one it begins), or "".
func didYouMean(given string, names []string) string {
	if s := registry.Suggest(given, names); s != "" {
		return s
	}
	for _, n := range names {
		if len(given) >= 3 && (strings.HasPrefix(n, given) || strings.HasPrefix(given, n)) {
			return fmt.Sprintf(" Did you mean %q?", n)
		}
	}
	return ""
}
