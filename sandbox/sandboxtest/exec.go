package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

func (s *suite) testExec(t *testing.T) {
	sb, spec := s.create(t, sandbox.Spec{})
	t.Run("exit-codes", func(t *testing.T) { checkExitCodes(t, sb) })
	t.Run("stdout-stderr", func(t *testing.T) { checkStreams(t, sb) })
	t.Run("stdin", func(t *testing.T) { checkStdin(t, sb) })
	t.Run("argv", func(t *testing.T) { checkArgv(t, sb) })
	t.Run("env", func(t *testing.T) { checkEnv(t, sb) })
	t.Run("workdir", func(t *testing.T) { checkWorkdir(t, sb, spec.Root) })
	t.Run("output-limit", func(t *testing.T) { checkOutputLimit(t, sb) })
	t.Run("timeout-kills-tree", func(t *testing.T) { checkTimeoutKillsTree(t, sb, "", s.sessions(t)) })
	t.Run("cancel-kills-tree", func(t *testing.T) { checkCancelKillsTree(t, sb, s.sessions(t)) })
	t.Run("concurrent", func(t *testing.T) { checkConcurrent(t, sb) })
}

// run runs req and fails t when it cannot be run at all.
func run(t *testing.T, sb sandbox.Sandbox, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(ctx(t), req)
	if err != nil {
		t.Fatalf("Exec(%q %q) failed to run: %v", req.Argv, req.Shell, err)
	}
	return res
}

func checkExitCodes(t *testing.T, sb sandbox.Sandbox) {
	for _, tc := range []struct {
		req  sandbox.ExecRequest
		want int
		what string
	}{
		{sandbox.ExecRequest{Shell: "true"}, 0, "a command that succeeds"},
		{sandbox.ExecRequest{Shell: "exit 7"}, 7, "exit 7"},
		{sandbox.ExecRequest{Argv: []string{"sh", "-c", "exit 201"}}, 201, "exit 201 of a program run by argv"},
		{sandbox.ExecRequest{Argv: []string{"agentctl-suite-no-such-program"}}, 127, "a program that does not exist (127, as a shell reports it)"},
	} {
		if res := run(t, sb, tc.req); res.ExitCode != tc.want || res.TimedOut {
			t.Errorf("%s came back as exit %d (timed out %v), want %d; stderr %q", tc.what, res.ExitCode, res.TimedOut, tc.want, res.Stderr)
		}
	}
}

func checkStreams(t *testing.T, sb sandbox.Sandbox) {
	res := run(t, sb, sandbox.ExecRequest{Shell: "echo out; echo err >&2; printf 'no newline' >&2; echo more"})
	if string(res.Stdout) != "out\nmore\n" || string(res.Stderr) != "err\nno newline" {
		t.Errorf("stdout and stderr were not kept apart, in order: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	if res.Wall <= 0 {
		t.Errorf("the wall time of a command was not measured: %v", res.Wall)
	}
	if res.Truncated || res.OriginalStdout != int64(len(res.Stdout)) || res.OriginalStderr != int64(len(res.Stderr)) {
		t.Errorf("short output is reported truncated or with other sizes: truncated %v, original %d/%d", res.Truncated, res.OriginalStdout, res.OriginalStderr)
	}
}

func checkStdin(t *testing.T, sb sandbox.Sandbox) {
	res := run(t, sb, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("from stdin")})
	if string(res.Stdout) != "from stdin" || res.ExitCode != 0 {
		t.Errorf("stdin did not reach the command: stdout %q, exit %d", res.Stdout, res.ExitCode)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	res = run(t, sb, sandbox.ExecRequest{Shell: "wc -c", Stdin: bytes.NewReader(big)})
	if got := strings.TrimSpace(string(res.Stdout)); got != strconv.Itoa(len(big)) {
		t.Errorf("1 MiB of stdin arrived as %s bytes (stderr %q)", got, res.Stderr)
	}
	res = run(t, sb, sandbox.ExecRequest{Shell: "cat; echo done", Timeout: time.Minute})
	if res.TimedOut || string(res.Stdout) != "done\n" {
		t.Errorf("a command given no stdin did not read end-of-file: stdout %q, timed out %v", res.Stdout, res.TimedOut)
	}
}

func checkArgv(t *testing.T, sb sandbox.Sandbox) {
	args := []string{"it's", `"q"`, "a b", "ü", "$HOME", "*", "", "-n"}
	res := run(t, sb, sandbox.ExecRequest{Argv: append([]string{"printf", "[%s]"}, args...)})
	want := "[it's][\"q\"][a b][ü][$HOME][*][][-n]"
	if string(res.Stdout) != want {
		t.Errorf("arguments of an argv request were changed on the way (quoted, split or expanded): got %q, want %q", res.Stdout, want)
	}
	if _, err := sb.Exec(ctx(t), sandbox.ExecRequest{}); err == nil {
		t.Error("a request with neither argv nor a shell string was run instead of refused")
	}
}

func checkEnv(t *testing.T, sb sandbox.Sandbox) {
	res := run(t, sb, sandbox.ExecRequest{
		Shell: `printf '%s|%s|%s' "$GREETING" "${EMPTY-unset}" "$MULTI"`,
		Env:   map[string]string{"GREETING": "hi 'there' $x `y`", "EMPTY": "", "MULTI": "a\nb"},
	})
	if want := "hi 'there' $x `y`||a\nb"; string(res.Stdout) != want {
		t.Errorf("the request's environment did not reach the command as given: got %q, want %q", res.Stdout, want)
	}
	res = run(t, sb, sandbox.ExecRequest{Shell: `echo "${GREETING-unset}"`})
	if string(res.Stdout) != "unset\n" {
		t.Errorf("one request's environment leaked into the next command: %q", res.Stdout)
	}
}

func checkWorkdir(t *testing.T, sb sandbox.Sandbox, root string) {
	c := ctx(t)
	if err := sb.WriteFile(c, "exec/wd/sub dir/data.txt", []byte("payload\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Where the workspace root is as a command sees it: spec.Root, or a
	// host directory for a sandbox that is one.
	top := strings.TrimSuffix(sh(t, sb, "finding the workspace root", "pwd"), "\n")
	if out := sh(t, sb, "reading a file at the root by its absolute path", "cat "+top+"/exec/wd/'sub dir'/data.txt"); out != "payload\n" {
		t.Errorf("a command without a workdir does not run in the workspace root (pwd %s, root %s): the workspace's file reads %q there", top, root, out)
	}
	res := run(t, sb, sandbox.ExecRequest{Shell: `cat data.txt; pwd`, Workdir: "exec/wd/sub dir"})
	if want := "payload\n" + strings.TrimSuffix(top, "/") + "/exec/wd/sub dir\n"; string(res.Stdout) != want {
		t.Errorf("a command with workdir %q ran elsewhere: got %q, want %q", "exec/wd/sub dir", res.Stdout, want)
	}
	o := makeOutside(t, sb)
	sh(t, sb, "making a symlink out of the workspace", "ln -s "+o.dir+" exec/wd/out")
	for _, wd := range []string{"..", "exec/../..", "exec/wd/out"} {
		res, err := sb.Exec(c, sandbox.ExecRequest{Shell: "touch escaped", Workdir: wd})
		if !isEscape(err) {
			t.Errorf("a workdir out of the workspace (%q) was not refused with ErrPathEscape: exit %d, %s", wd, res.ExitCode, describe(err))
		}
	}
	o.check(t, sb, "a command with a workdir through a symlink out of the workspace")
	if _, err := sb.Exec(c, sandbox.ExecRequest{Shell: "true", Workdir: "exec/no-such-dir"}); err == nil || !strings.Contains(err.Error(), "no-such-dir") {
		t.Errorf("a missing workdir was not refused with an error naming it: %s", describe(err))
	}
}

func checkOutputLimit(t *testing.T, sb sandbox.Sandbox) {
	res := run(t, sb, sandbox.ExecRequest{
		Shell:       "i=0; while [ $i -lt 2000 ]; do echo line$i; echo err$i >&2; i=$((i+1)); done",
		OutputLimit: 100,
	})
	var outSize, errSize int64
	for i := range 2000 {
		outSize += int64(len(fmt.Sprintf("line%d\n", i)))
		errSize += int64(len(fmt.Sprintf("err%d\n", i)))
	}
	if !res.Truncated || res.OriginalStdout != outSize || res.OriginalStderr != errSize {
		t.Errorf("output past the limit was not reported cut with its real sizes: truncated %v, original %d/%d, want %d/%d", res.Truncated, res.OriginalStdout, res.OriginalStderr, outSize, errSize)
	}
	if !bytes.HasPrefix(res.Stdout, []byte("line0\nline1\n")) || !bytes.HasSuffix(res.Stdout, []byte("line1999\n")) || !bytes.Contains(res.Stdout, []byte("truncated")) {
		t.Errorf("output past the limit did not keep its head and tail with a marker between: %q", res.Stdout)
	}
	if !bytes.HasPrefix(res.Stderr, []byte("err0\n")) || !bytes.HasSuffix(res.Stderr, []byte("err1999\n")) {
		t.Errorf("stderr past the limit did not keep its head and tail: %q", res.Stderr)
	}
	if len(res.Stdout) > 400 || len(res.Stderr) > 400 {
		t.Errorf("output past a limit of 100 bytes kept %d and %d bytes", len(res.Stdout), len(res.Stderr))
	}
}

// treeScript starts, in the background of the command, a child that
// ignores SIGTERM, in a session of its own when sessions is set, and an
// orphaned grandchild, each appending to a heartbeat file in dir (a
// polite kill, or one of the command's process group alone, would miss
// them), then prints "started" and sleeps.
func treeScript(dir string, sessions bool) string {
	beat := func(f string) string { return "while :; do echo x >> " + dir + "/" + f + "; sleep 0.2; done" }
	setsid := ""
	if sessions {
		setsid = "setsid "
	}
	return fmt.Sprintf(`mkdir -p %s && %ssh -c 'trap "" TERM; %s' >/dev/null 2>&1 & (sh -c '%s' >/dev/null 2>&1 &); echo started; sleep 1000`,
		dir, setsid, beat("beat.a"), beat("beat.b"))
}

// sessions reports whether the tree checks may start processes in
// sessions of their own: unless the provider declares it cannot end
// them, which is logged.
func (s *suite) sessions(t *testing.T) bool {
	why, lacks := sandbox.Lacks(s.f.Provider, sandbox.CapabilitySessionKill)
	if lacks {
		t.Logf("the provider declares it lacks %s (%s): only the command's process group is checked", sandbox.CapabilitySessionKill, why)
	}
	return !lacks
}

// waitStill fails t unless the heartbeat files treeScript's processes
// write in dir exist and stop growing: what is to be killed started, and
// was killed.
func waitStill(t *testing.T, sb sandbox.Sandbox, dir, what string) {
	t.Helper()
	c := ctx(t)
	sizes := func() (string, error) {
		var b strings.Builder
		for _, f := range []string{"beat.a", "beat.b"} {
			fi, err := sb.Stat(c, dir+"/"+f)
			if err != nil {
				return "", fmt.Errorf("the background process writing %s never started: %v", f, err)
			}
			fmt.Fprintf(&b, "%s=%d ", f, fi.Size)
		}
		return b.String(), nil
	}
	deadline := time.Now().Add(30 * time.Second)
	last, err := sizes()
	for err == nil {
		time.Sleep(time.Second)
		var now string
		if now, err = sizes(); err != nil || now == last {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s left processes of the command running: their heartbeat files still grow (%s)", what, now)
			return
		}
		last = now
	}
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

func checkTimeoutKillsTree(t *testing.T, sb sandbox.Sandbox, user string, sessions bool) {
	dir := "exec/timeout-" + randHex(3)
	res, err := sb.Exec(ctx(t), sandbox.ExecRequest{Shell: treeScript(dir, sessions), Timeout: 3 * time.Second, User: user})
	if err != nil {
		t.Fatalf("a command that times out failed to run: %v", err)
	}
	if !res.TimedOut || res.ExitCode == 0 {
		t.Errorf("a command past its timeout was not reported timed out with a failing exit: timed out %v, exit %d", res.TimedOut, res.ExitCode)
	}
	if !strings.Contains(string(res.Stdout), "started") {
		t.Errorf("the output a command wrote before its timeout was lost: stdout %q", res.Stdout)
	}
	waitStill(t, sb, dir, "the timeout")
}

func checkCancelKillsTree(t *testing.T, sb sandbox.Sandbox, sessions bool) {
	dir := "exec/cancel-" + randHex(3)
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	time.AfterFunc(3*time.Second, cancel)
	_, err := sb.Exec(c, sandbox.ExecRequest{Shell: treeScript(dir, sessions)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a command whose context was cancelled did not return the cancellation: %s", describe(err))
	}
	waitStill(t, sb, dir, "cancelling the context")
}

func checkConcurrent(t *testing.T, sb sandbox.Sandbox) {
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res, err := sb.Exec(ctx(t), sandbox.ExecRequest{
				Shell: `mkdir -p exec/par && echo "$N" > exec/par/out-$N && sleep 0.3 && cat exec/par/out-$N`,
				Env:   map[string]string{"N": strconv.Itoa(i)},
			})
			if err == nil && string(res.Stdout) != strconv.Itoa(i)+"\n" {
				err = fmt.Errorf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent command %d of %d interfered with the others: %v", i, n, err)
		}
	}
	infos, err := sb.ReadDir(ctx(t), "exec/par")
	if err != nil || len(infos) != n {
		t.Errorf("concurrent commands left %d files, want %d (%v)", len(infos), n, err)
	}
	if _, err := sb.Stat(ctx(t), "exec/par/out-0"); errors.Is(err, fs.ErrNotExist) {
		t.Error("a concurrent command's file is missing")
	}
}
