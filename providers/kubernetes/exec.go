package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/agentctl/agentctl/sandbox"
)

// killGrace is how long output may keep flowing after the process tree
// was killed before the stream is cut.
const killGrace = 5 * time.Second

// streams are one exec's standard streams and terminal.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool
	rows, cols     int
}

// stream runs argv in the sandbox's container through pods/exec
// (WebSocket, SPDY when the upgrade fails) and returns its exit code. A
// non-zero exit is a result, not an error.
func (s *Sandbox) stream(ctx context.Context, argv []string, io streams) (int, error) {
	ns, name := s.pod()
	opts := &corev1.PodExecOptions{
		Container: containerName, Command: argv,
		Stdin: io.stdin != nil, Stdout: io.stdout != nil, Stderr: io.stderr != nil && !io.tty, TTY: io.tty,
	}
	u := s.p.core.rc.Post().Namespace(ns).Resource("pods").Name(name).SubResource("exec").
		VersionedParams(opts, s.p.core.params).URL()
	ws, err := remotecommand.NewWebSocketExecutor(s.p.cfg, http.MethodGet, u.String())
	if err != nil {
		return -1, fmt.Errorf("exec in Pod %s: %w", name, err)
	}
	spdyExec, err := remotecommand.NewSPDYExecutor(s.p.cfg, http.MethodPost, u)
	if err != nil {
		return -1, fmt.Errorf("exec in Pod %s: %w", name, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdyExec, httpstream.IsUpgradeFailure)
	if err != nil {
		return -1, fmt.Errorf("exec in Pod %s: %w", name, err)
	}
	so := remotecommand.StreamOptions{Stdin: io.stdin, Stdout: io.stdout, Tty: io.tty}
	if !io.tty {
		so.Stderr = io.stderr
	} else {
		rows, cols := io.rows, io.cols
		if rows <= 0 || cols <= 0 {
			rows, cols = sandbox.DefaultTTYRows, sandbox.DefaultTTYCols
		}
		so.TerminalSizeQueue = &fixedSize{size: &remotecommand.TerminalSize{Width: uint16(cols), Height: uint16(rows)}}
	}
	err = ex.StreamWithContext(ctx, so)
	if err == nil {
		return 0, nil
	}
	if ee, ok := errors.AsType[utilexec.ExitError](err); ok && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	return -1, s.execFailed(ctx, argv[0], err)
}

// execFailed explains an exec that failed without an exit status: the
// Pod is gone (sandbox.ErrNotFound), not running (sandbox.ErrUnavailable)
// or the call itself failed.
func (s *Sandbox) execFailed(ctx context.Context, prog string, err error) error {
	ns, name := s.pod()
	pod, gerr := s.getPod(ctx)
	switch {
	case gerr != nil:
		return sandbox.MarkUnavailable(fmt.Errorf("exec %s in Pod %s/%s: %w (and reading the Pod failed: %v)", prog, ns, name, err, gerr))
	case pod == nil:
		return fmt.Errorf("exec %s: Pod %s/%s: %w (%v)", prog, ns, name, sandbox.ErrNotFound, err)
	case !podRunning(pod):
		return sandbox.MarkUnavailable(fmt.Errorf("exec %s: Pod %s/%s is not running (phase %s): %w", prog, ns, name, pod.Status.Phase, err))
	}
	if strings.Contains(err.Error(), "forbidden") {
		return fmt.Errorf("exec %s in Pod %s/%s: %w; the provider's Role needs pods/exec (create, get)", prog, ns, name, err)
	}
	return fmt.Errorf("exec %s in Pod %s/%s: %w", prog, ns, name, err)
}

type fixedSize struct{ size *remotecommand.TerminalSize }

// Next returns the terminal's size once, then blocks no one: nil ends
// the queue.
func (f *fixedSize) Next() *remotecommand.TerminalSize {
	s := f.size
	f.size = nil
	return s
}

// command is an exec prepared from a request: the program and its
// arguments, and what the shell wrapper that runs them in the Pod sets up
// (directory, environment, user, the marker of its process tree).
type command struct {
	argv   []string
	prog   string
	marker string
	wd     string
	su     string
	// env is the environment as shell export lines. It never goes in the
	// exec request's command, which is a URL the API server may log
	// (audit logs): the wrapper reads it from stdin ahead of the
	// command's own input, or, for a terminal, from a private file it
	// deletes at once.
	env string
	// end, when set, is printed on stdout and stderr by the wrapper once
	// the command has exited, so a stream that loses its tail in transit
	// is told from a command that printed less (sandbox.EndMarker).
	end string
}

// prepare turns req into the command that runs it.
func (s *Sandbox) prepare(ctx context.Context, req sandbox.ExecRequest) (command, error) {
	argv, err := req.Command()
	if err != nil {
		return command{}, err
	}
	cmd := command{argv: argv, prog: argv[0], marker: randHex(16), wd: s.d.Root}
	if req.User != "" {
		if _, ok := s.spec.Accounts.User(req.User); !ok {
			return command{}, fmt.Errorf("exec: %w", &sandbox.UnknownUserError{Name: req.User})
		}
		cmd.su = req.User
	}
	if req.Workdir != "" {
		r, err := s.resolve(ctx, "exec workdir", req.Workdir, true)
		if err != nil {
			return command{}, err
		}
		if r.Followed != 'D' {
			return command{}, fmt.Errorf("exec: workdir %q is not a directory in the workspace", req.Workdir)
		}
		cmd.wd = r.Follow
	}
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		if !sandbox.ValidEnvName(k) || strings.ContainsRune(req.Env[k], 0) {
			return command{}, fmt.Errorf("exec: invalid environment variable %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var env strings.Builder
	for _, k := range keys {
		env.WriteString("export " + k + "=" + sandbox.ShellQuote(req.Env[k]) + "\n")
	}
	cmd.env = env.String()
	return cmd, nil
}

// envEnd ends the environment the wrapper reads from stdin.
func (c command) envEnd() string { return "agentctl-env-end-" + c.marker }

// wrapper is the argv that runs c in the Pod. envFile, when set, is the
// file the environment was written to (terminals); otherwise, when c has
// an environment, the wrapper reads it from stdin up to envEnd.
func (c command) wrapper(envFile string) []string {
	var sc strings.Builder
	sc.WriteString("export " + sandbox.ExecMarkerEnv + "=" + c.marker + "\n")
	switch {
	case envFile != "":
		sc.WriteString(". " + sandbox.ShellQuote(envFile) + "; rm -f -- " + sandbox.ShellQuote(envFile) + "\n")
	case c.env != "":
		sc.WriteString("__e=\nwhile IFS= read -r __l; do [ \"$__l\" = " + sandbox.ShellQuote(c.envEnd()) + " ] && break; __e=\"$__e$__l\n\"; done\neval \"$__e\"; unset __e __l\n")
	}
	inner := "cd -- " + sandbox.ShellQuote(c.wd) + " || exit 126\nexec \"$@\"\n"
	if c.su == "" {
		sc.WriteString(inner)
	} else {
		// su (BusyBox's or util-linux's) switches to the user's uid, its
		// private group and its supplementary groups from the Pod's
		// /etc/passwd and /etc/group, where createAccounts put them; -m
		// keeps the environment set here. "--" ends su's options: its
		// getopt would take a -c among the command's own arguments as
		// its own.
		sc.WriteString("exec su -m -s /bin/sh -c " + sandbox.ShellQuote(inner) + " -- " + sandbox.ShellQuote(c.su) + " sh \"$@\"\n")
	}
	script := sc.String()
	if c.end != "" {
		// The command runs in a subshell (still replaced by the command
		// through exec, so its environment carries the marker and the
		// shell printing the end does not) and the end follows its exit.
		// The outer shell's own stderr is silenced while it waits: a
		// shell reports a child killed by a signal ("Killed"), which the
		// command run through exec never printed.
		end := sandbox.ShellQuote(c.end)
		script = "exec 3>&2 2>/dev/null\n(\nexec 2>&3 3>&-\n" + script + ")\n__s=$?\nexec 2>&3 3>&-\n" +
			"printf '%s' " + end + "\nprintf '%s' " + end + " >&2\nexit $__s\n"
	}
	return append([]string{"/bin/sh", "-c", script, "sh"}, c.argv...)
}

// stdin is what the wrapper of c reads: its environment, then in.
func (c command) stdin(in io.Reader) io.Reader {
	if c.env == "" {
		return in
	}
	head := strings.NewReader(c.env + c.envEnd() + "\n")
	if in == nil {
		return head
	}
	return io.MultiReader(head, in)
}

// envFileScript writes stdin to a file only the container's user can
// read, in /dev/shm (memory) when there is one, and prints its path.
const envFileScript = `umask 077
d=/dev/shm
{ [ -d "$d" ] && [ -w "$d" ]; } || d=${TMPDIR:-/tmp}
f="$d/agentctl-env-$1"
cat > "$f" && printf '%s' "$f"
`

// writeEnvFile puts c's environment in a private file in the Pod for a
// terminal's wrapper to read and delete.
func (s *Sandbox) writeEnvFile(ctx context.Context, c command) (string, error) {
	out, stderr, code, err := s.runScript(ctx, envFileScript, strings.NewReader(c.env), c.marker)
	if err != nil {
		return "", fmt.Errorf("exec %s: passing its environment: %w", c.prog, err)
	}
	if code != 0 || len(out) == 0 {
		return "", fmt.Errorf("exec %s: passing its environment: exit %d: %s", c.prog, code, strings.TrimSpace(string(stderr)))
	}
	return string(out), nil
}

// Exec runs a command in the Pod: argv directly, or Shell with /bin/sh
// -c, in Workdir beneath the workspace root, with separate stdout and
// stderr kept head+tail within OutputLimit. On timeout every process of
// the command's tree is killed and TimedOut is set.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	cmd, err := s.prepare(ctx, req)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	stdout := sandbox.NewHeadTail(req.OutputLimit)
	stderr := sandbox.NewHeadTail(req.OutputLimit)
	cmd.end = "agentctl-exec-end-" + randHex(16)
	endOut, endErr := sandbox.NewEndMarker(stdout, cmd.end), sandbox.NewEndMarker(stderr, cmd.end)
	start := time.Now()
	code, timedOut, err := s.run(ctx, cmd, streams{stdin: req.Stdin, stdout: endOut, stderr: endErr}, req.Timeout)
	// (A HeadTail's writes never fail.)
	_ = endOut.Flush()
	_ = endErr.Flush()
	res := sandbox.CapturedResult(stdout, stderr, code, time.Since(start), timedOut)
	if err == nil && !timedOut && (!endOut.Seen() || !endErr.Seen()) {
		// The command exited (its status arrived) but the end of its
		// output did not: a runtime closed the stream early.
		ns, name := s.pod()
		err = fmt.Errorf("exec %s in Pod %s/%s: %w: %d bytes of stdout and %d of stderr arrived, the command exited with %d",
			cmd.prog, ns, name, sandbox.ErrOutputLost, res.OriginalStdout, res.OriginalStderr, code)
	}
	return res, err
}

// run runs cmd to completion, killing its process tree when timeout
// (if > 0) passes or ctx ends.
func (s *Sandbox) run(ctx context.Context, cmd command, io streams, timeout time.Duration) (int, bool, error) {
	envFile := ""
	if io.tty && cmd.env != "" {
		f, err := s.writeEnvFile(ctx, cmd)
		if err != nil {
			return -1, false, err
		}
		envFile = f
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		argv := cmd.wrapper(envFile)
		if envFile == "" {
			io.stdin = cmd.stdin(io.stdin)
		}
		code, err := s.stream(sctx, argv, io)
		done <- result{code, err}
	}()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case r := <-done:
		return r.code, false, r.err
	case <-timer:
		kerr := s.killTree(ctx, cmd)
		select {
		case r := <-done:
			if r.err != nil && kerr != nil {
				return -1, true, fmt.Errorf("exec %s timed out and killing its processes failed: %w", cmd.prog, kerr)
			}
			return r.code, true, nil
		case <-time.After(killGrace):
			cancel()
			<-done
			if kerr != nil {
				return -1, true, fmt.Errorf("exec %s timed out and killing its processes failed: %w", cmd.prog, kerr)
			}
			return -1, true, nil
		}
	case <-ctx.Done():
		_ = s.killTree(ctx, cmd)
		cancel()
		<-done
		return -1, false, fmt.Errorf("exec %s: %w", cmd.prog, ctx.Err())
	}
}

// killTree kills every process of cmd's tree (carrying its marker) with
// a second exec. A command run as a manifest user is killed by that user
// first: without CAP_SYS_PTRACE, root cannot read another user's
// /proc/PID/environ; then by the container's user, for what su left.
func (s *Sandbox) killTree(ctx context.Context, cmd command) error {
	if cmd.su != "" {
		argv := []string{"/bin/sh", "-c", "exec su -m -s /bin/sh -c " + sandbox.ShellQuote(sandbox.KillTreeScript) + " -- " + sandbox.ShellQuote(cmd.su) + " sh \"$1\"", "sh", cmd.marker}
		if err := s.kill(ctx, argv); err != nil {
			return err
		}
	}
	return s.kill(ctx, []string{"/bin/sh", "-c", sandbox.KillTreeScript, "sh", cmd.marker})
}

// kill runs a kill helper until it reports every marked process gone.
func (s *Sandbox) kill(ctx context.Context, argv []string) error {
	kctx, cancel := sandbox.CleanupContext(ctx)
	defer cancel()
	var kerr error
	// The killer itself may fail to start while a fork bomb holds every
	// process the Pod may have: retry until it gets one.
	for attempt := 0; attempt < 20; attempt++ {
		var out, errOut bytes.Buffer
		code, err := s.stream(kctx, argv, streams{stdout: &out, stderr: &errOut})
		if err == nil && code == 0 {
			return nil
		}
		kerr = err
		if err == nil {
			kerr = fmt.Errorf("kill helper exited %d: %s", code, strings.TrimSpace(errOut.String()))
		}
		if errors.Is(err, sandbox.ErrNotFound) || kctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return kerr
}

// StartProcess starts a command whose streams stay attached (an MCP
// server over stdio, a terminal session); cancelling ctx or Kill kills
// its process tree. On a terminal, stdin stays open until the process
// ends: closing it early would lose the terminal's last output.
func (s *Sandbox) StartProcess(ctx context.Context, req sandbox.ProcessRequest) (sandbox.Process, error) {
	cmd, err := s.prepare(ctx, sandbox.ExecRequest{Argv: req.Argv, Shell: req.Shell, Workdir: req.Workdir, Env: req.Env, User: req.User})
	if err != nil {
		return nil, err
	}
	return sandbox.StartStreamed(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		io := streams{stdin: stdin, stdout: stdout, stderr: stderr}
		if req.TTY {
			ended := make(chan struct{})
			defer close(ended)
			io = streams{stdin: &holdOpen{r: stdin, ended: ended}, stdout: stdout, tty: true, rows: req.Rows, cols: req.Cols}
		}
		code, _, err := s.run(ctx, cmd, io, 0)
		return code, err
	}), nil
}

// holdOpen reads r and, at its end, waits for the process to end before
// reporting EOF: a terminal's stdin closed early loses its last output.
type holdOpen struct {
	r     io.Reader
	ended <-chan struct{}
}

func (h *holdOpen) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if err != nil && n == 0 {
		<-h.ended
	}
	return n, err
}

// runScript runs an internal helper script (as the container's user)
// with stdin and returns its stdout, stderr and exit code.
func (s *Sandbox) runScript(ctx context.Context, script string, stdin io.Reader, args ...string) ([]byte, []byte, int, error) {
	var out, errOut bytes.Buffer
	argv := append([]string{"/bin/sh", "-c", script, "sh"}, args...)
	code, err := s.stream(ctx, argv, streams{stdin: stdin, stdout: &out, stderr: &errOut})
	return out.Bytes(), errOut.Bytes(), code, err
}

// createAccounts creates the manifest's users and groups with the
// image's own tools (sandbox.AccountsScript).
func (s *Sandbox) createAccounts(ctx context.Context) error {
	if s.spec.Accounts.Empty() {
		return nil
	}
	_, stderr, code, err := s.runScript(ctx, sandbox.AccountsScript, nil, sandbox.AccountsArgs(s.spec.Accounts, s.d.Root)...)
	if err != nil {
		return fmt.Errorf("creating the manifest's users and groups: %w", err)
	}
	if code != 0 {
		return sandbox.AccountsError(s.spec.Image, code, string(stderr))
	}
	return nil
}
