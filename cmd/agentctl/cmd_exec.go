package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// execOutputLimit is how much of each stream agentctl exec keeps.
const execOutputLimit = 64 << 20

func execCommand() *command {
	return &command{
		Name:       "exec",
		ShortUsage: "agentctl exec [options] [-it] ADDR -- CMD [ARG...]",
		ShortHelp:  "Run a command in a managed sandbox, like docker exec.",
		LongHelp: "  Runs CMD in the sandbox's workspace with the manifest's environment and\n" +
			"  exits with the command's exit code. A stopped sandbox is started for the\n" +
			"  command and stopped again afterwards. Holds the state lock while it runs,\n" +
			"  so it never touches a sandbox an apply is using: it fails naming the\n" +
			"  holder, or waits with -lock-timeout. Like docker exec, the command's\n" +
			"  standard output and error are passed through byte for byte, escape\n" +
			"  sequences included: pipe them to a file or through cat -v to inspect\n" +
			"  output you do not trust. -it runs the command on a terminal with your\n" +
			"  keyboard attached (agentctl exec -it sandbox.NAME -- sh), -i alone keeps\n" +
			"  standard input attached without a terminal.",
		Run: leaf(arguments.ParseExec, (*meta).exec),
	}
}

func (m *meta) exec(ctx context.Context, args *arguments.Exec) error {
	m.noColor = args.NoColor
	view := views.NewExec(m.view())
	if err := checkExecTerminal(args, views.IsTerminal(os.Stdin)); err != nil {
		return err
	}
	b, st, err := m.lockedState(ctx, args.Backend, "exec")
	if err != nil {
		return err
	}
	defer b.unlock(ctx)
	e := b.engine(0, nil, nil)
	ws, restore, err := e.OpenWorkspace(ctx, st, args.Address)
	if err != nil {
		return err
	}
	defer m.restore(restore)
	if args.Interactive || args.TTY {
		code, err := m.execAttached(ctx, ws, args)
		if err != nil {
			return fmt.Errorf("%s: %w", args.Address, err)
		}
		if code != 0 {
			return exitCode(code)
		}
		return nil
	}
	res, err := ws.Exec(ctx, sandbox.ExecRequest{Argv: args.Argv, Stdin: stdinIfPiped(), OutputLimit: execOutputLimit})
	if err != nil {
		return fmt.Errorf("%s: %w", args.Address, err)
	}
	view.Output(res.Stdout, res.Stderr)
	if res.TimedOut {
		return exitCode(124)
	}
	if res.ExitCode != 0 {
		return exitCode(res.ExitCode)
	}
	return nil
}

// restore puts a sandbox that exec or tool call started back as it was,
// and reports it when that fails: the command's own result stands.
func (m *meta) restore(restore func() error) {
	if err := restore(); err != nil {
		m.view().Error(err)
	}
}

// stdinIfPiped returns standard input unless it is a terminal (or
// closed).
func stdinIfPiped() io.Reader {
	if _, err := os.Stdin.Stat(); err != nil || views.IsTerminal(os.Stdin) {
		return nil
	}
	return os.Stdin
}

// checkExecTerminal refuses exec -t when standard input is not a
// terminal (a pipe, a file, /dev/null), before the state is locked or a
// sandbox started: the command's terminal would have no keyboard.
func checkExecTerminal(args *arguments.Exec, stdinTerminal bool) error {
	switch {
	case !args.TTY || stdinTerminal:
		return nil
	case args.Interactive:
		return errors.New("exec -it needs standard input to be a terminal, and it is not (a pipe, a file or /dev/null): use -i alone to pass standard input to the command without a terminal, or run agentctl exec -it from a terminal")
	}
	return errors.New("exec -t needs standard input to be a terminal, and it is not (a pipe, a file or /dev/null): drop -t (add -i to pass standard input to the command), or run agentctl exec -t from a terminal")
}

func toolCommand() *command {
	call := &command{
		Name:       "call",
		ShortUsage: "agentctl tool call [options] NAME (-dir DIR | -sandbox ADDR)",
		ShortHelp:  "Run one capability tool by hand, for debugging tools and patches.",
		LongHelp: "  Runs the tool NAME (exec_command, apply_patch, view_image, or a command\n" +
			"  capability of the configuration) with the arguments given as JSON by\n" +
			"  -args or on standard input. apply_patch also takes the raw patch text.\n" +
			"  -dir runs against a host directory without any isolation; -sandbox\n" +
			"  runs in a managed sandbox from the state, holding the state lock as\n" +
			"  exec does. The tool's output is shown as the model would read it, with\n" +
			"  control characters escaped (\\x1b) so it cannot drive the terminal.",
		Run: leaf(arguments.ParseToolCall, (*meta).toolCall),
	}
	return &command{
		Name:        "tool",
		ShortUsage:  "agentctl tool call [options] NAME",
		ShortHelp:   "Run agent tools by hand.",
		Subcommands: []*command{call},
		Run: func(context.Context, *meta, []string) error {
			return fmt.Errorf("tool needs a subcommand: call")
		},
	}
}

func (m *meta) toolCall(ctx context.Context, args *arguments.ToolCall) error {
	m.noColor = args.NoColor
	view := views.NewToolCall(m.view())
	input := args.Input
	if input == "" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("reading the tool arguments from standard input: %w", err)
		}
		input = string(b)
	}
	var ws *sandbox.Workspace
	var root string
	if args.Dir != "" {
		abs, err := filepath.Abs(args.Dir)
		if err != nil {
			return err
		}
		hd, err := hostfs.NewHostDir(abs)
		if err != nil {
			return fmt.Errorf("-dir %s: %w", args.Dir, err)
		}
		ws, root = &sandbox.Workspace{Sandbox: hd}, abs
	} else {
		b, st, err := m.lockedState(ctx, args.Backend, "tool call")
		if err != nil {
			return err
		}
		defer b.unlock(ctx)
		e := b.engine(0, nil, nil)
		w, restore, err := e.OpenWorkspace(ctx, st, args.Sandbox)
		if err != nil {
			return err
		}
		defer m.restore(restore)
		ws, root = w, e.WorkspaceRoot(args.Sandbox)
	}
	t, err := m.findTool(ws, root, args.Name, args.Backend)
	if err != nil {
		return err
	}
	if args.Name == "apply_patch" && strings.HasPrefix(strings.TrimSpace(input), "*** Begin Patch") {
		// The raw patch text is accepted as is.
	} else if strings.TrimSpace(input) == "" {
		input = "{}"
	}
	out, err := t.Call(ctx, input)
	if err != nil {
		view.Failed(err)
		return exitCode(exitError)
	}
	view.Result(out)
	return nil
}

// findTool builds the named tool over ws: a built-in capability tool, or
// a command capability of the configuration.
func (m *meta) findTool(ws *sandbox.Workspace, root, name string, args arguments.Backend) (tools.Tool, error) {
	fo := tools.FilesystemOptions{Root: root}
	switch name {
	case "exec_command":
		return tools.NewExecCommand(ws, tools.ExecOptions{Root: root}, nil), nil
	case "apply_patch":
		return tools.NewApplyPatch(ws, fo), nil
	case "view_image":
		return tools.NewViewImage(ws, fo), nil
	}
	cfg, diags := m.loadConfig(args.Config, args.Vars)
	if diags.HasErrors() {
		m.view().Diagnostics(diags, files(cfg))
		return nil, errDiagnostics
	}
	for _, c := range cfg.Capabilities {
		if c.Command != nil && c.Name == name {
			t, err := tools.NewCommandTool(ws, c.Name, c.Command.Description, c.Command.Parameters, c.Command.Command, c.Command.Timeout)
			if err != nil {
				return nil, err
			}
			// The capability's run_as holds by hand too.
			return t.RunAs(c.Command.RunAs), nil
		}
	}
	return nil, fmt.Errorf("unknown tool %q: the built-in tools are exec_command, apply_patch and view_image; command capabilities of the configuration are called by their name", name)
}
