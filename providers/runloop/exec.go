package runloop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

// tempDir holds the files of a command's input and output in the devbox.
const tempDir = "/tmp"

// Exec implements sandbox.Sandbox. Runloop's executions keep only the
// tail of a command's output, as text, so the command's stdin, stdout
// and stderr are files in the devbox, uploaded before and downloaded
// after (bytes as they are). The command runs asynchronously; a timeout
// kills its tree (sandbox.KillTreeScript finds every process carrying
// its marker) and reports TimedOut with exit code -1.
func (w *Workspace) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	argv, err := req.Command()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if req.User != "" {
		return sandbox.ExecResult{}, fmt.Errorf("exec: %w", &sandbox.UnknownUserError{Name: req.User})
	}
	for k := range req.Env {
		if !sandbox.ValidEnvName(k) {
			return sandbox.ExecResult{}, fmt.Errorf("environment variable name %q is not valid", k)
		}
	}
	cwd := w.root
	if req.Workdir != "" {
		r, err := w.resolve(ctx, "exec in", req.Workdir, true)
		if err != nil {
			return sandbox.ExecResult{}, err
		}
		if r.Kind != 'D' {
			return sandbox.ExecResult{}, fmt.Errorf("exec in %q: not a directory", req.Workdir)
		}
		cwd = r.Follow
	}
	return w.exec(ctx, argv, req, cwd)
}

// exec runs argv in cwd.
func (w *Workspace) exec(ctx context.Context, argv []string, req sandbox.ExecRequest, cwd string) (sandbox.ExecResult, error) {
	if err := w.keepAlive(ctx); err != nil {
		return sandbox.ExecResult{}, err
	}
	begin := time.Now()
	c := &execution{w: w, marker: nonce()}
	c.files = tempDir + "/agentctl-x-" + c.marker
	stdin := "/dev/null"
	if req.Stdin != nil {
		data, err := io.ReadAll(req.Stdin)
		if err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("exec: reading input: %w", err)
		}
		stdin = c.files + ".in"
		if err := w.c.Upload(ctx, w.id, stdin, data); err != nil {
			return sandbox.ExecResult{}, w.unavailable(ctx, err)
		}
	}
	code, timedOut, err := c.run(ctx, commandLine(cwd, argv, req.Env, c.marker, stdin, c.files), req.Timeout)
	if err != nil {
		c.cleanup(ctx)
		return sandbox.ExecResult{}, err
	}
	o, e := sandbox.NewHeadTail(req.OutputLimit), sandbox.NewHeadTail(req.OutputLimit)
	if err := c.collect(ctx, o, e); err != nil {
		return sandbox.ExecResult{}, err
	}
	if timedOut {
		code = -1
	}
	return sandbox.CapturedResult(o, e, code, time.Since(begin), timedOut), nil
}

// commandLine is the shell command Runloop runs: in cwd, with env and the
// marker, input from stdin (removed once open) and output to files.
func commandLine(cwd string, argv []string, env map[string]string, marker, stdin, files string) string {
	var b strings.Builder
	b.WriteString("{ ")
	if strings.HasPrefix(stdin, files) {
		b.WriteString("rm -f -- " + sandbox.ShellQuote(stdin) + "; ")
	}
	b.WriteString("cd -- " + sandbox.ShellQuote(cwd) + " || exit 1; exec env ")
	for k, v := range env {
		b.WriteString(sandbox.ShellQuote(k+"="+v) + " ")
	}
	b.WriteString(sandbox.ShellQuote(sandbox.ExecMarkerEnv + "=" + marker))
	for _, a := range argv {
		b.WriteString(" " + sandbox.ShellQuote(a))
	}
	b.WriteString("; } <" + sandbox.ShellQuote(stdin) + " >" + sandbox.ShellQuote(files+".out") + " 2>" + sandbox.ShellQuote(files+".err"))
	return b.String()
}

// execution is one command run through Runloop's executions.
type execution struct {
	w      *Workspace
	marker string
	files  string
}

// run starts line and waits for it; past timeout (0: none) or when ctx
// ends it kills the command's tree.
func (c *execution) run(ctx context.Context, line string, timeout time.Duration) (int, bool, error) {
	w := c.w
	ex, err := w.c.ExecuteAsync(ctx, w.id, line)
	if err != nil {
		return 0, false, w.unavailable(ctx, err)
	}
	id := ex.ExecutionID
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for ex.Status != "completed" {
		wait := 25 * time.Second
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return -1, true, c.kill(ctx, id)
			}
			wait = min(wait, left)
		}
		if ex, err = w.c.WaitExecution(ctx, w.id, id, wait); err != nil {
			if ctx.Err() != nil {
				if kerr := c.kill(ctx, id); kerr != nil {
					return 0, false, fmt.Errorf("exec: %w; %v", ctx.Err(), kerr)
				}
				return 0, false, fmt.Errorf("exec: %w", ctx.Err())
			}
			return 0, false, w.unavailable(ctx, err)
		}
	}
	if ex.ExitStatus == nil {
		return 0, false, sandbox.MarkUnavailable(fmt.Errorf("exec in devbox %s: the command completed without an exit status", w.id))
	}
	return *ex.ExitStatus, false, nil
}

// kill kills every process of the command: those carrying its marker
// (sandbox.KillTreeScript), and the execution's process group.
func (c *execution) kill(ctx context.Context, id string) error {
	cctx, cancel := sandbox.CleanupContext(ctx)
	defer cancel()
	var errs []error
	line := "/bin/sh -c " + sandbox.ShellQuote(sandbox.KillTreeScript) + " sh " + sandbox.ShellQuote(c.marker)
	if code, _, err := (&execution{w: c.w}).run(cctx, line, time.Minute); err != nil {
		errs = append(errs, err)
	} else if code != 0 {
		errs = append(errs, fmt.Errorf("some processes of the command survived the kill (exit %d)", code))
	}
	if err := c.w.c.KillExecution(cctx, c.w.id, id); err != nil && !IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the command timed out but could not be killed: %w", err)
	}
	return nil
}

// collect downloads the command's output into o and e, then removes the
// files.
func (c *execution) collect(ctx context.Context, o, e io.Writer) error {
	defer c.cleanup(ctx)
	for _, f := range []struct {
		name string
		w    io.Writer
	}{{".out", o}, {".err", e}} {
		b, err := c.w.c.Download(ctx, c.w.id, c.files+f.name)
		if err != nil {
			return c.w.unavailable(ctx, fmt.Errorf("exec: reading the command's output: %w", err))
		}
		_, _ = f.w.Write(b)
	}
	return nil
}

// cleanup removes the command's files; a failure only leaves small files
// in the devbox's /tmp, so it is not the command's error.
func (c *execution) cleanup(ctx context.Context) {
	cctx, cancel := sandbox.CleanupContext(ctx)
	defer cancel()
	line := "rm -f -- " + sandbox.ShellQuote(c.files+".in") + " " + sandbox.ShellQuote(c.files+".out") + " " + sandbox.ShellQuote(c.files+".err")
	_, _ = c.w.c.ExecuteAsync(cctx, c.w.id, line)
}

// run executes a helper script and returns its stdout, exit code and
// stderr.
func (w *Workspace) run(ctx context.Context, op, script string) (string, int, string, error) {
	// Helpers run in /: the workspace root may not exist yet.
	res, err := w.exec(ctx, []string{"/bin/sh", "-c", script}, sandbox.ExecRequest{Timeout: 5 * time.Minute, OutputLimit: 64 << 20}, "/")
	if err != nil {
		return "", 0, "", fmt.Errorf("%s: %w", op, err)
	}
	if res.TimedOut {
		return "", 0, "", fmt.Errorf("%s: timed out", op)
	}
	return string(res.Stdout), res.ExitCode, strings.TrimSpace(string(res.Stderr)), nil
}

// unavailable marks an error of the API about devbox w as
// sandbox.ErrUnavailable when the devbox is suspended or gone: by the
// answer's status (404, 409, 502), or, for another refusal (Runloop
// documents no status for a command sent to a suspended devbox), by
// the devbox's status, which the error then names.
func (w *Workspace) unavailable(ctx context.Context, err error) error {
	a, ok := errors.AsType[*APIError](err)
	switch {
	case !ok:
		return err
	case a.Status == 404 || a.Status == 409 || a.Status == 502:
		return sandbox.MarkUnavailable(err)
	case a.Status >= 500:
		return err
	}
	d, gerr := w.c.Get(ctx, w.id)
	if IsNotFound(gerr) {
		return sandbox.MarkUnavailable(err)
	}
	if gerr != nil || d.Status == StatusRunning {
		return err
	}
	return sandbox.MarkUnavailable(fmt.Errorf("devbox %s is %s (start it again): %w", w.id, d.Status, err))
}

func nonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
