package daytona

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/internal/hosted"
	"github.com/agentctl/agentctl/sandbox"
)

// maxInlineScript is the largest script passed on the command line
// (Linux caps one argument at 128 KiB); larger ones are uploaded first.
const maxInlineScript = 96 << 10

// maxStdin bounds ExecRequest.Stdin (it is sent inside the script).
const maxStdin = 32 << 20

func nonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// workdir resolves a command's working directory inside the sandbox, as
// the file operations resolve paths: a directory reached through a
// symlink out of the workspace is refused (sandbox.ErrPathEscape), and so
// is one that is missing, with errors naming it. It returns the resolved
// absolute path ("" for the workspace root).
func (w *Workspace) workdir(ctx context.Context, rel string) (string, error) {
	if rel == "" {
		return "", nil
	}
	r, err := w.resolve(ctx, "exec workdir", rel, true)
	if err != nil {
		return "", err
	}
	if r.Followed != 'D' {
		return "", fmt.Errorf("exec: workdir %q is not a directory in the workspace", rel)
	}
	return r.Follow, nil
}

// commandScript is the script that runs req's command from its working
// directory with its environment, replacing the shell.
func (w *Workspace) commandScript(req sandbox.ExecRequest) (string, error) {
	dir := w.root
	if req.Workdir != "" {
		p, err := hosted.Abs(w.root, req.Workdir)
		if err != nil {
			return "", err
		}
		dir = p
	}
	var inner strings.Builder
	inner.WriteString("cd -- " + sandbox.ShellQuote(dir) + " || exit 126\n")
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		if !sandbox.ValidEnvName(k) {
			return "", fmt.Errorf("environment variable name %q is not valid", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		inner.WriteString("export " + k + "=" + sandbox.ShellQuote(req.Env[k]) + "\n")
	}
	argv, err := req.Command()
	if err != nil {
		return "", err
	}
	inner.WriteString("exec")
	for _, a := range argv {
		inner.WriteString(" " + sandbox.ShellQuote(a))
	}
	inner.WriteString("\n")
	sudo, err := w.asUser(req.User)
	if err != nil || sudo == "" {
		return inner.String(), err
	}
	// The user's shell changes directory and sets the environment (sudo
	// resets it).
	return "exec " + sudo + "/bin/sh -c " + sandbox.ShellQuote(inner.String()) + "\n", nil
}

// execScript renders req as a POSIX sh script run from the workspace. The
// command itself runs in a subshell with its stdin, working directory and
// environment set; when stderrMark is non-empty, its stderr is kept aside
// and printed after stdout behind the mark (process/execute returns one
// combined stream), so the two can be told apart.
func (w *Workspace) execScript(req sandbox.ExecRequest, stdin []byte, stderrMark string) (string, error) {
	// The user's command runs under sudo with timeout(1) inside it, as
	// that user, so a timeout's kill reaches the user's processes; stdin
	// and stderr files stay the sandbox user's, opened before sudo.
	sudo, err := w.asUser(req.User)
	if err != nil {
		return "", err
	}
	req.User = ""
	inner, err := w.commandScript(req)
	if err != nil {
		return "", err
	}
	var sc strings.Builder
	// A kill on timeout must reach the whole tree: GNU timeout runs the
	// command in its own process group and kills the group.
	killer := ""
	if req.Timeout > 0 {
		secs := int(math.Ceil(req.Timeout.Seconds()))
		sc.WriteString(fmt.Sprintf("if command -v timeout >/dev/null 2>&1; then __ac_t='timeout -s KILL %d'; else __ac_t=; fi\n", secs))
		killer = "$__ac_t "
	}
	in := "</dev/null"
	if stdin != nil {
		sc.WriteString("__ac_in=$(mktemp \"${TMPDIR:-/tmp}/agentctl-in.XXXXXX\") || exit 125\n")
		sc.WriteString("base64 -d >\"$__ac_in\" <<'__AGENTCTL_STDIN__'\n")
		enc := base64.StdEncoding.EncodeToString(stdin)
		for len(enc) > 76 {
			sc.WriteString(enc[:76] + "\n")
			enc = enc[76:]
		}
		sc.WriteString(enc + "\n__AGENTCTL_STDIN__\n")
		in = "<\"$__ac_in\""
	}
	cmd := sudo + killer + "/bin/sh -c " + sandbox.ShellQuote(inner)
	if stderrMark != "" {
		sc.WriteString("__ac_err=$(mktemp \"${TMPDIR:-/tmp}/agentctl-err.XXXXXX\") || exit 125\n")
		sc.WriteString(cmd + " " + in + " 2>\"$__ac_err\"\n__ac_rc=$?\n")
		sc.WriteString("printf '%s' " + sandbox.ShellQuote(stderrMark) + "\ncat \"$__ac_err\"\nrm -f \"$__ac_err\"\n")
	} else {
		sc.WriteString(cmd + " " + in + "\n__ac_rc=$?\n")
	}
	if stdin != nil {
		sc.WriteString("rm -f \"$__ac_in\"\n")
	}
	sc.WriteString("exit $__ac_rc\n")
	return sc.String(), nil
}

// launcher turns a script into a command line the daemon can run: the
// daemon splits on spaces honouring quotes but not escapes and runs the
// result without a shell, so the script travels base64-encoded. Large
// scripts are uploaded to a temporary file first; cleanup removes it.
func (w *Workspace) launcher(ctx context.Context, script string) (cmd string, cleanup func(), err error) {
	enc := base64.StdEncoding.EncodeToString([]byte(script))
	if len(enc) <= maxInlineScript {
		return "/bin/sh -c 'eval \"$(printf %s " + enc + " | base64 -d)\"'", func() {}, nil
	}
	p := w.p.tempDir + "/agentctl-exec-" + nonce() + ".sh"
	if err := w.s.FileSystem.UploadFile(ctx, []byte(script), p); err != nil {
		return "", nil, err
	}
	return "/bin/sh " + p, func() {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		_ = w.s.FileSystem.DeleteFile(cctx, p, false)
	}, nil
}

// Exec implements sandbox.Sandbox. Commands with a timeout of at most
// Options.ShortExec (default 60s) run through process/execute in one
// request; the others run as an asynchronous command in a fresh session
// whose status is polled (with the SDK's backoff, at most every second)
// until it exits, so a command may run for hours. A timeout kills the
// command (deleting its session on the long path) and sets TimedOut with
// exit code -1. Output is kept head+tail per stream (OutputLimit).
func (w *Workspace) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	var stdin []byte
	if req.Stdin != nil {
		b, err := io.ReadAll(io.LimitReader(req.Stdin, maxStdin+1))
		if err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("reading stdin: %w", err)
		}
		if len(b) > maxStdin {
			return sandbox.ExecResult{}, fmt.Errorf("stdin is larger than %d bytes", maxStdin)
		}
		stdin = b
	}
	start := time.Now()
	var (
		res sandbox.ExecResult
		err error
	)
	if req.Workdir, err = w.workdir(ctx, req.Workdir); err != nil {
		return res, err
	}
	if req.Timeout > 0 && req.Timeout <= w.p.shortExec {
		res, err = w.execShort(ctx, req, stdin)
	} else {
		res, err = w.execSession(ctx, req, stdin)
	}
	res.Wall = time.Since(start)
	return res, err
}

func finish(req sandbox.ExecRequest, stdout, stderr []byte, code int, timedOut bool) sandbox.ExecResult {
	o, e := sandbox.NewHeadTail(req.OutputLimit), sandbox.NewHeadTail(req.OutputLimit)
	o.Write(stdout)
	e.Write(stderr)
	return sandbox.CapturedResult(o, e, code, 0, timedOut)
}

func (w *Workspace) execShort(ctx context.Context, req sandbox.ExecRequest, stdin []byte) (sandbox.ExecResult, error) {
	mark := "\x1e@@agentctl-stderr-" + nonce() + "@@\x1e"
	script, err := w.execScript(req, stdin, mark)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	cmd, cleanup, err := w.launcher(ctx, script)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	defer cleanup()
	start := time.Now()
	// The daemon's own limit is a little longer than the command's, so the
	// in-sandbox timeout (which kills the process group) fires first.
	resp, err := w.s.Process.ExecuteCommand(ctx, cmd, "", nil, req.Timeout+2*time.Second)
	if err != nil {
		if statusOf(err) == 408 {
			return finish(req, nil, nil, -1, true), nil
		}
		return sandbox.ExecResult{}, err
	}
	out := resp.Result
	var stdout, stderr string
	if i := strings.LastIndex(out, mark); i >= 0 {
		stdout, stderr = out[:i], out[i+len(mark):]
	} else {
		stdout = out
	}
	code := resp.ExitCode
	timedOut := code == 137 && time.Since(start) >= req.Timeout
	if timedOut {
		code = -1
	}
	return finish(req, []byte(stdout), []byte(stderr), code, timedOut), nil
}

func (w *Workspace) execSession(ctx context.Context, req sandbox.ExecRequest, stdin []byte) (sandbox.ExecResult, error) {
	script, err := w.execScript(req, stdin, "")
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	cmd, cleanup, err := w.launcher(ctx, script)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	defer cleanup()
	sid := "agentctl-" + nonce()
	if err := w.s.Process.CreateSession(ctx, sid); err != nil {
		return sandbox.ExecResult{}, err
	}
	defer func() {
		cctx, cancel := sandbox.CleanupContext(ctx)
		defer cancel()
		_ = w.s.Process.DeleteSession(cctx, sid)
	}()
	r, err := w.s.Process.ExecuteSessionCommand(ctx, sid, cmd, true)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	wctx, cancel := withTimeout(ctx, req.Timeout)
	defer cancel()
	code := r.ExitCode
	interval := w.p.poll
	begin := time.Now()
	for code == nil {
		if err := w.p.client.sleep(wctx, interval); err != nil {
			break
		}
		c, err := w.s.Process.GetSessionCommand(wctx, sid, r.CmdID)
		if err != nil {
			if wctx.Err() != nil {
				break
			}
			return sandbox.ExecResult{}, err
		}
		code = c.ExitCode
		if time.Since(begin) > 5*time.Second {
			interval = min(time.Duration(float64(interval)*1.1), time.Second)
		}
	}
	if code == nil && ctx.Err() != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec: %w", ctx.Err())
	}
	// Collect what the command wrote (also on timeout, before the session
	// and the command with it are deleted by the deferred cleanup).
	lctx, lcancel := sandbox.CleanupContext(ctx)
	defer lcancel()
	logs, lerr := w.s.Process.GetSessionCommandLogs(lctx, sid, r.CmdID)
	if lerr != nil {
		logs = &SessionCommandLogs{}
		if code != nil {
			return sandbox.ExecResult{}, lerr
		}
	}
	if code == nil {
		// Timed out: kill now, so nothing keeps running.
		dctx, dcancel := sandbox.CleanupContext(ctx)
		derr := w.s.Process.DeleteSession(dctx, sid)
		dcancel()
		if derr != nil && !errors.Is(derr, context.Canceled) {
			return finish(req, []byte(logs.Stdout), []byte(logs.Stderr), -1, true), fmt.Errorf("the command timed out but could not be killed: %w", derr)
		}
		return finish(req, []byte(logs.Stdout), []byte(logs.Stderr), -1, true), nil
	}
	if *code == 137 && req.Timeout > 0 && time.Since(begin) >= req.Timeout {
		// Killed by the in-sandbox timeout just before our own deadline.
		return finish(req, []byte(logs.Stdout), []byte(logs.Stderr), -1, true), nil
	}
	return finish(req, []byte(logs.Stdout), []byte(logs.Stderr), *code, false), nil
}

// run executes a helper script through process/execute and returns its
// stdout; a non-zero exit is an error carrying stderr.
func (w *Workspace) run(ctx context.Context, op, script string) (string, int, string, error) {
	res, err := w.execShort(ctx, sandbox.ExecRequest{Shell: script, Timeout: 50 * time.Second, OutputLimit: 64 << 20}, nil)
	if err != nil {
		return "", 0, "", fmt.Errorf("%s: %w", op, err)
	}
	if res.TimedOut {
		return "", 0, "", fmt.Errorf("%s: timed out", op)
	}
	return string(res.Stdout), res.ExitCode, string(bytes.TrimSpace(res.Stderr)), nil
}
