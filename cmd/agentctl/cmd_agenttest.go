package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/agenttest"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/builtin"
)

func testCommand() *command {
	return &command{
		Name:       "test",
		ShortUsage: "agentctl test [options] [PATH]",
		ShortHelp:  "Run the configuration's tests (*.test.hcl) in temporary state.",
		LongHelp: "  Runs each test file's run blocks in order, each a plan or an apply of\n" +
			"  the configuration with the file's variables and scripted model\n" +
			"  replies, and checks its assert blocks. Every file gets a temporary\n" +
			"  state directory; its sandboxes are destroyed afterwards. Exits 1 when\n" +
			"  any assertion fails or any run cannot be carried out.",
		Run: leaf(arguments.ParseTest, (*meta).test),
	}
}

// test runs agentctl test.
func (m *meta) test(ctx context.Context, args *arguments.Test) error {
	m.noColor = args.NoColor
	view := views.NewTest(args.ViewType, m.view())
	// Tests are not resumable: an interrupt cancels the runs, and the
	// teardown still destroys what they created.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	replay := args.Replay
	if replay != "" {
		abs, err := filepath.Abs(replay)
		if err != nil {
			return fmt.Errorf("-replay %s: %w", replay, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return fmt.Errorf("-replay %s: not a directory of cassettes (record one with agentctl apply -record DIR)", replay)
		}
		replay = abs
	}
	sum, err := agenttest.Test(ctx, agenttest.Options{
		ConfigPath:     args.Path,
		Files:          args.Filter,
		Vars:           args.Vars.Vars,
		VarFiles:       args.Vars.VarFiles,
		Environ:        m.Environ,
		Registry:       builtin.Registry(),
		TracerProvider: m.traces,
		Version:        config.Version,
		Parallelism:    args.Parallelism,
		Events:         view.Event,
		Replay:         replay,
	})
	if err != nil {
		return err
	}
	view.Summary(sum)
	if !sum.OK() {
		return exitCode(exitError)
	}
	return nil
}
