package main

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine"
)

func consoleCommand() *command {
	return &command{
		Name:       "console",
		ShortUsage: "agentctl console [options]",
		ShortHelp:  "Evaluate expressions against the configuration and state.",
		LongHelp: "  Reads one expression a line from standard input and prints its value:\n" +
			"  variables (var.NAME), locals, functions, run outputs (run.NAME.output)\n" +
			"  and sandbox URLs (sandbox.NAME.urls) recorded by the last apply. What\n" +
			"  has not run yet prints as (known after apply), sensitive values as\n" +
			"  (sensitive value). On a terminal it prompts with \"> \", prints errors and\n" +
			"  goes on; \"exit\" or end of input (Ctrl-D) ends it. With standard input\n" +
			"  not a terminal it prints each line's value and stops at the first\n" +
			"  error, exiting 1. The state is read once, without the state lock, and\n" +
			"  never changed; no model or sandbox provider is contacted.",
		Run: leaf(arguments.ParseConsole, (*meta).console),
	}
}

// consoleFile is the file name diagnostics give the console's input.
const consoleFile = "<stdin>"

func (m *meta) console(ctx context.Context, args *arguments.Console) error {
	m.noColor = args.NoColor
	b, st, err := readState(ctx, m.openBackend, args.Backend)
	if err != nil {
		return err
	}
	s := &consoleSession{
		m:           m,
		cfg:         b.cfg,
		rv:          engine.RuntimeValues(st),
		view:        views.NewConsole(m.view()),
		interactive: views.IsTerminal(os.Stdin),
	}
	return s.run(m.stdinReader())
}

// consoleSession evaluates the lines of one agentctl console.
type consoleSession struct {
	m           *meta
	cfg         *config.Config
	rv          config.RuntimeValues
	view        views.Console
	interactive bool
	// input is what has been read so far, for diagnostics' snippets.
	input strings.Builder
}

// lineReader reads lines; *bufio.Reader is one.
type lineReader interface {
	ReadString(delim byte) (string, error)
}

// run evaluates each line of r until exit or end of input. Interactive,
// an error is shown and the next line read; otherwise the first error
// ends the console with exit status 1, as terraform console does.
func (s *consoleSession) run(r lineReader) error {
	for n := 1; ; n++ {
		if s.interactive {
			s.view.Prompt()
		}
		line, err := r.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if line == "" && err != nil {
			if s.interactive {
				s.view.Newline()
			}
			return nil
		}
		offset := s.input.Len()
		s.input.WriteString(line)
		expr := strings.TrimSpace(line)
		if expr == "exit" {
			return nil
		}
		if expr != "" {
			lead := len(line) - len(strings.TrimLeft(line, " \t"))
			start := hcl.Pos{Line: n, Column: 1 + lead, Byte: offset + lead}
			if failed := s.eval(expr, start); failed && !s.interactive {
				return errDiagnostics
			}
		}
		if err != nil {
			return nil
		}
	}
}

// eval evaluates expr, which starts at start in the input, and shows its
// value or its errors; it reports whether there were errors.
func (s *consoleSession) eval(expr string, start hcl.Pos) bool {
	x, diags := hclsyntax.ParseExpression([]byte(expr), consoleFile, start)
	if !diags.HasErrors() {
		v, evalDiags := s.cfg.EvalExpr(x, s.rv)
		diags = append(diags, evalDiags...)
		if !diags.HasErrors() {
			if err := s.view.Value(v); err != nil {
				s.m.view().Error(err)
				return true
			}
			return false
		}
	}
	fs := maps.Clone(files(s.cfg))
	if fs == nil {
		fs = map[string]*hcl.File{}
	}
	fs[consoleFile] = &hcl.File{Bytes: []byte(s.input.String())}
	s.m.view().Diagnostics(diags, fs)
	return true
}
