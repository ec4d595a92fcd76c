package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// DefaultExecTimeout is the shell capability's command timeout when none is
// configured.
const DefaultExecTimeout = 120 * time.Second

// ExecOptions are the shell capability's settings.
type ExecOptions struct {
	// Timeout is the longest a command may run; a model's yield_time_ms
	// can only shorten it. 0 means DefaultExecTimeout.
	Timeout time.Duration
	// MaxOutputTokens caps the output returned to the model (about 4
	// bytes per token); a model's max_output_tokens can only lower it.
	// 0 means no cap beyond the sandbox's own head+tail limit.
	MaxOutputTokens int
	// Root is the workspace root inside the sandbox (the manifest root,
	// e.g. /workspace); absolute workdirs must lie under it. Empty refuses
	// absolute workdirs.
	Root string
	// User is the manifest user every command (and session) runs as (the
	// capability's run_as); "" is the sandbox's default user.
	User string
}

// ExecCommand is the exec_command tool of the shell capability.
type ExecCommand struct {
	ws       *sandbox.Workspace
	opts     ExecOptions
	sessions *Sessions
}

// DefaultExecYield is exec_command's yield_time_ms default for a command
// on a terminal (the SDK's 10 s).
const DefaultExecYield = 10 * time.Second

// NewExecCommand returns the exec_command tool running commands in ws.
// With sessions (a run's), a command started with tty, or one still
// running after an explicit yield_time_ms, goes on as a session that
// write_stdin drives; without, every command runs to completion.
func NewExecCommand(ws *sandbox.Workspace, opts ExecOptions, sessions *Sessions) *ExecCommand {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultExecTimeout
	}
	return &ExecCommand{ws: ws, opts: opts, sessions: sessions}
}

// Interactive reports whether commands in ws can run as sessions (the
// sandbox starts attached processes).
func Interactive(ws *sandbox.Workspace) bool {
	_, ok := ws.Sandbox.(sandbox.ProcessStarter)
	return ok
}

const execCommandDescription = "Runs a command in a PTY, returning output or a session ID for ongoing interaction."

// execCommandSchema is the SDK's ExecCommandArgs schema.
const execCommandSchema = `{
  "properties": {
    "cmd": {"description": "Shell command to execute.", "minLength": 1, "title": "Cmd", "type": "string"},
    "workdir": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "description": "Optional working directory to run the command in; defaults to the turn cwd.", "title": "Workdir"},
    "shell": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "description": "Shell binary to launch. Defaults to the user's default shell.", "title": "Shell"},
    "login": {"default": true, "description": "Whether to run the shell with -l/-i semantics. Defaults to true.", "title": "Login", "type": "boolean"},
    "tty": {"default": false, "description": "Whether to allocate a TTY for the command. Defaults to false (plain pipes); set to true to open a PTY and access TTY process.", "title": "Tty", "type": "boolean"},
    "yield_time_ms": {"default": 10000, "description": "How long to wait (in milliseconds) for output before yielding.", "minimum": 0, "title": "Yield Time Ms", "type": "integer"},
    "max_output_tokens": {"anyOf": [{"minimum": 1, "type": "integer"}, {"type": "null"}], "default": null, "description": "Maximum number of tokens to return. Excess output will be truncated.", "title": "Max Output Tokens"}
  },
  "required": ["cmd"],
  "title": "ExecCommandArgs",
  "type": "object"
}`

// Definition implements Tool.
func (t *ExecCommand) Definition() model.Tool {
	return model.Tool{
		Name:        "exec_command",
		Description: execCommandDescription,
		Parameters:  json.RawMessage(execCommandSchema),
	}
}

type execArgs struct {
	Cmd             *string `json:"cmd"`
	Workdir         *string `json:"workdir"`
	Shell           *string `json:"shell"`
	Login           *bool   `json:"login"`
	TTY             *bool   `json:"tty"`
	YieldTimeMS     *int64  `json:"yield_time_ms"`
	MaxOutputTokens *int    `json:"max_output_tokens"`
}

// Call implements Tool. A command that exits non-zero or times out is a
// normal result; only bad arguments and sandbox failures are errors.
func (t *ExecCommand) Call(ctx context.Context, arguments string) (Output, error) {
	a, err := parseExecArgs(arguments)
	if err != nil {
		return Output{}, err
	}
	req := execRequest(a)
	req.Timeout, req.User = t.opts.Timeout, t.opts.User
	if a.YieldTimeMS != nil && *a.YieldTimeMS > 0 {
		if d := time.Duration(*a.YieldTimeMS) * time.Millisecond; d < req.Timeout {
			req.Timeout = d
		}
	}
	if a.Workdir != nil && strings.TrimSpace(*a.Workdir) != "" {
		wd, err := checkDir(ctx, t.ws, t.opts.Root, *a.Workdir)
		if err != nil {
			return Output{}, fmt.Errorf("exec_command: workdir: %w", err)
		}
		req.Workdir = wd
	}
	maxTokens := maxTokens(t.opts.MaxOutputTokens, a.MaxOutputTokens)

	tty := a.TTY != nil && *a.TTY
	var notices []string
	if t.sessions != nil && Interactive(t.ws) && (tty || a.YieldTimeMS != nil) {
		out, err := t.startSession(ctx, req, tty, a.YieldTimeMS, maxTokens)
		if _, unsupported := errors.AsType[*sandbox.UnsupportedError](err); !unsupported {
			return out, err
		}
		// This sandbox has no terminals: run the command once instead.
		notices = append(notices, "A TTY is not available in this sandbox; the command ran with plain pipes.")
		tty = false
	}

	start := time.Now()
	res, err := t.ws.Exec(ctx, req)
	wall := time.Since(start)
	if ctx.Err() != nil {
		// The run is being cancelled: no result is recorded, so the call
		// runs again when the run resumes.
		return Output{}, fmt.Errorf("exec_command: cancelled: %w", ctx.Err())
	}
	if outputLost(err) {
		notices = append(notices, OutputLostNotice)
		err = nil
	}
	if err != nil && !res.TimedOut {
		if ctx.Err() != nil {
			return Output{}, fmt.Errorf("exec_command: %w", ctx.Err())
		}
		return Output{}, scrubErr(t.ws, fmt.Errorf("exec_command: running %q in the sandbox: %w", *a.Cmd, err))
	}
	if tty {
		if t.sessions == nil {
			notices = append(notices, "Sessions are not available here (a chat turn or a tool called by hand runs its commands to completion); the command ran once with plain pipes.")
		} else {
			notices = append(notices, "A TTY is not available in this sandbox; the command ran with plain pipes.")
		}
	}
	if res.TimedOut {
		notices = append(notices, TimeoutNotice(req.Timeout))
	}
	res.Wall = wall
	return Output{ExitCode: exitCode(res), Text: FormatExecOutput(res, maxTokens, notices...)}, nil
}

// startSession runs a command as a session: on a terminal when tty, and
// waits up to yield (DefaultExecYield when not given) for it to end. A
// command still running then is left running as a session whose id the
// result gives; the capability's timeout still bounds its whole life.
func (t *ExecCommand) startSession(ctx context.Context, req sandbox.ExecRequest, tty bool, yieldMS *int64, maxTokens int) (Output, error) {
	yield := DefaultExecYield
	if yieldMS != nil {
		yield = time.Duration(*yieldMS) * time.Millisecond
	}
	start := time.Now()
	ss, err := t.sessions.start(ctx, t.ws, sandbox.ProcessRequest{Argv: req.Argv, Shell: req.Shell, Workdir: req.Workdir, TTY: tty, User: req.User}, t.opts.Timeout)
	if err != nil {
		if _, ok := errors.AsType[*sandbox.UnsupportedError](err); ok {
			return Output{}, err
		}
		if ctx.Err() != nil {
			return Output{}, fmt.Errorf("exec_command: cancelled: %w", ctx.Err())
		}
		return Output{}, scrubErr(t.ws, fmt.Errorf("exec_command: starting the command in the sandbox: %w", err))
	}
	c := ss.collect(ctx, yield)
	if ctx.Err() != nil {
		t.sessions.remove(ss.id)
		ss.kill()
		return Output{}, fmt.Errorf("exec_command: cancelled: %w", ctx.Err())
	}
	if c.exited {
		t.sessions.remove(ss.id)
	}
	return Output{Text: c.format(ss.id, time.Since(start), t.opts.Timeout, maxTokens)}, nil
}

// checkDir checks p lexically and then that it is a directory in ws.
func checkDir(ctx context.Context, ws *sandbox.Workspace, root, p string) (string, error) {
	rel, err := toolPath(root, p)
	if err != nil {
		return "", err
	}
	if rel == "" {
		return "", nil
	}
	fi, err := ws.Stat(ctx, rel)
	if err != nil {
		if uerr := ws.Unavailable(ctx, err); isUnavailable(uerr) {
			return "", uerr
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("directory %q does not exist in the workspace: create it first or pick another", p)
		}
		return "", fmt.Errorf("checking %q: %w", p, err)
	}
	if fi.Mode&fs.ModeSymlink == 0 && !fi.Mode.IsDir() {
		return "", fmt.Errorf("%q is not a directory", p)
	}
	return rel, nil
}

// Describe implements Describer: the argv the sandbox will execute for
// these arguments, and whether the command is simple (SimpleWords).
func (t *ExecCommand) Describe(arguments string) (Invocation, error) {
	a, err := parseExecArgs(arguments)
	if err != nil {
		return Invocation{}, err
	}
	argv, err := execRequest(a).Command()
	if err != nil {
		return Invocation{}, fmt.Errorf("exec_command: %w", err)
	}
	inv := Invocation{Argv: argv}
	if a.Shell == nil || strings.TrimSpace(*a.Shell) == "" {
		inv.Words, inv.Simple = SimpleWords(*a.Cmd)
	}
	return inv, nil
}

// execRequest is the command part of the request a call makes: the
// model's shell, with -lc for a login shell (the default) or -c, or else
// /bin/sh -c (never a login shell).
func execRequest(a execArgs) sandbox.ExecRequest {
	var req sandbox.ExecRequest
	if a.Shell != nil && strings.TrimSpace(*a.Shell) != "" {
		flag := "-c"
		if a.Login == nil || *a.Login {
			flag = "-lc"
		}
		req.Argv = []string{*a.Shell, flag, *a.Cmd}
	} else {
		req.Shell = *a.Cmd
	}
	return req
}

// parseExecArgs decodes and checks exec_command's arguments.
func parseExecArgs(arguments string) (execArgs, error) {
	var a execArgs
	if err := decodeArgs("exec_command", arguments, &a); err != nil {
		return a, err
	}
	if a.Cmd == nil || strings.TrimSpace(*a.Cmd) == "" {
		return a, errors.New(`exec_command: "cmd" is required: give the shell command to run, e.g. {"cmd": "ls -la"}`)
	}
	if a.YieldTimeMS != nil && *a.YieldTimeMS < 0 {
		return a, fmt.Errorf("exec_command: yield_time_ms is %d: it must be 0 or more milliseconds", *a.YieldTimeMS)
	}
	if a.MaxOutputTokens != nil && *a.MaxOutputTokens < 1 {
		return a, fmt.Errorf("exec_command: max_output_tokens is %d: it must be at least 1", *a.MaxOutputTokens)
	}
	return a, nil
}
