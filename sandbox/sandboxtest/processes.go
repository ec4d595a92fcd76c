package sandboxtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/internal/ttytest"
	"github.com/agentctl/agentctl/sandbox"
)

// testProcesses: processes whose streams stay attached (MCP servers,
// exec_command sessions), on a terminal (PTY sessions) or not.
func (s *suite) testProcesses(t *testing.T) {
	sb, _ := s.create(t, sandbox.Spec{})
	ps, ok := sb.(sandbox.ProcessStarter)
	why, lacks := sandbox.Lacks(s.f.Provider, sandbox.CapabilityProcesses)
	switch {
	case lacks && ok:
		t.Fatalf("the provider declares it lacks %s (%s), but its sandbox starts them", sandbox.CapabilityProcesses, why)
	case lacks:
		ws := &sandbox.Workspace{Sandbox: sb}
		_, err := ws.StartProcess(ctx(t), sandbox.ProcessRequest{Shell: "true"})
		if _, ok := errors.AsType[*sandbox.UnsupportedError](err); !ok {
			t.Errorf("starting a process in a sandbox lacking %s = %s, want an UnsupportedError", sandbox.CapabilityProcesses, describe(err))
		}
		return
	case !ok:
		t.Fatalf("%T is not a sandbox.ProcessStarter, and the provider does not declare it lacks %s", sb, sandbox.CapabilityProcesses)
	}
	t.Run("attached-streams", func(t *testing.T) { checkAttached(t, ps) })
	t.Run("terminal-shell", func(t *testing.T) {
		p, err := ps.StartProcess(ctx(t), sandbox.ProcessRequest{Argv: []string{"sh", "-i"}, TTY: true})
		if err != nil {
			t.Fatalf("starting a shell on a terminal: %v", err)
		}
		ttytest.DriveShell(t, p)
	})
	t.Run(CheckTerminalName, func(t *testing.T) {
		s.known(t, CheckTerminalName, func() error {
			out, _, err := runProcess(t, ps, sandbox.ProcessRequest{Shell: "tty", TTY: true})
			// The last word: a terminal that starts a login shell and
			// types the command (Daytona's) shows that line's echo
			// first, and its prompt may land before the output.
			words := strings.Fields(out)
			if got := strings.Join(words[max(len(words)-1, 0):], ""); err != nil || !strings.HasPrefix(got, "/dev/") {
				return fmt.Errorf("a process on a terminal cannot name it: tty printed %q (%s)", got, describe(err))
			}
			return nil
		})
	})
	t.Run("terminal-output", func(t *testing.T) { checkTerminalOutput(t, ps) })
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill-ends-tree/tty=%v", tty), func(t *testing.T) { checkKill(t, sb, ps, tty, s.sessions(t)) })
	}
}

// runProcess runs req to its end and returns its output and exit code.
func runProcess(t *testing.T, ps sandbox.ProcessStarter, req sandbox.ProcessRequest) (stdout string, code int, err error) {
	t.Helper()
	p, err := ps.StartProcess(ctx(t), req)
	if err != nil {
		return "", 0, fmt.Errorf("StartProcess: %w", err)
	}
	go io.Copy(io.Discard, p.Stderr())
	out := readToEnd(t, p, p.Stdout(), "the output of "+req.Shell)
	code, err = p.Wait()
	return out, code, err
}

// readToEnd reads r until it ends, which it must within a minute of the
// process exiting; what names it for the failure.
func readToEnd(t *testing.T, p sandbox.Process, r io.Reader, what string) string {
	t.Helper()
	var b testfiles.SyncBuffer
	done := make(chan struct{})
	go func() { io.Copy(&b, r); close(done) }()
	select {
	case <-done:
		return b.String()
	case <-time.After(time.Minute):
		p.Kill()
		t.Fatalf("%s never ended: a process that exited must end its output (read so far: %q)", what, b.String())
		return ""
	}
}

// checkAttached: input reaches the process while it runs, its answers
// come back before it exits, stderr stays apart, and its exit code is
// reported.
func checkAttached(t *testing.T, ps sandbox.ProcessStarter) {
	p, err := ps.StartProcess(ctx(t), sandbox.ProcessRequest{
		Shell: `while read -r l; do echo "got $l"; echo "err $l" >&2; [ "$l" = quit ] && exit 4; done`,
	})
	if err != nil {
		t.Fatalf("StartProcess: %v", err)
	}
	var errOut testfiles.SyncBuffer
	errDone := make(chan struct{})
	go func() { io.Copy(&errOut, p.Stderr()); close(errDone) }()
	if _, err := io.WriteString(p.Stdin(), "one\n"); err != nil {
		t.Fatalf("writing to a process's stdin: %v", err)
	}
	first := make(chan string, 1)
	go func() {
		buf := make([]byte, len("got one\n"))
		n, _ := io.ReadFull(p.Stdout(), buf)
		first <- string(buf[:n])
	}()
	select {
	case got := <-first:
		if got != "got one\n" {
			t.Errorf("a running process's answer to its first line came back as %q", got)
		}
	case <-time.After(time.Minute):
		p.Kill()
		t.Fatal("a running process's answer did not come back before it exited: its output is not streamed")
	}
	io.WriteString(p.Stdin(), "quit\n")
	rest := readToEnd(t, p, p.Stdout(), "the stdout of a process that exited while its stdin was open")
	code, err := p.Wait()
	<-errDone
	if string(rest) != "got quit\n" || code != 4 || err != nil {
		t.Errorf("the process's last output or exit code was lost: stdout %q, exit %d, %s", rest, code, describe(err))
	}
	if got := errOut.String(); got != "err one\nerr quit\n" {
		t.Errorf("a process's stderr did not come back apart from stdout: %q", got)
	}
}

// checkTerminalOutput: on a terminal, stderr comes with stdout, and the
// terminal has the size asked for.
func checkTerminalOutput(t *testing.T, ps sandbox.ProcessStarter) {
	// The size is read after a moment: Docker daemons before API 1.42
	// size an exec's terminal only once it runs.
	p, err := ps.StartProcess(ctx(t), sandbox.ProcessRequest{Shell: "echo to-err >&2; echo to-out; sleep 1; stty size", TTY: true, Rows: 33, Cols: 101})
	if err != nil {
		t.Fatalf("StartProcess on a terminal: %v", err)
	}
	var errOut bytes.Buffer
	errDone := make(chan struct{})
	go func() { io.Copy(&errOut, p.Stderr()); close(errDone) }()
	out := readToEnd(t, p, p.Stdout(), "the output of a process on a terminal")
	code, err := p.Wait()
	<-errDone
	got := strings.ReplaceAll(out, "\r\n", "\n")
	if code != 0 || err != nil || !strings.Contains(got, "to-err\n") || !strings.Contains(got, "to-out\n") || errOut.Len() != 0 {
		t.Errorf("a process on a terminal did not send stderr with stdout: stdout %q, stderr %q, exit %d, %s", out, errOut.String(), code, describe(err))
	}
	if !strings.Contains(got, "33 101") {
		t.Errorf("a terminal asked for 33 rows and 101 columns has another size: %q", got)
	}
}

// checkKill: Kill ends a process and everything it started, and Wait
// then reports it killed.
func checkKill(t *testing.T, sb sandbox.Sandbox, ps sandbox.ProcessStarter, tty, sessions bool) {
	dir := "proc/kill-" + randHex(3)
	p, err := ps.StartProcess(ctx(t), sandbox.ProcessRequest{Shell: treeScript(dir, sessions), TTY: tty})
	if err != nil {
		t.Fatalf("StartProcess: %v", err)
	}
	go io.Copy(io.Discard, p.Stderr())
	var out testfiles.SyncBuffer
	go io.Copy(&out, p.Stdout())
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "started") || !beating(t, sb, dir) {
		if time.Now().After(deadline) {
			p.Kill()
			t.Fatalf("the process and its children did not start: output %q", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill: %v", err)
	}
	done := make(chan struct{})
	var code int
	go func() { code, err = p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Wait did not return after Kill")
	}
	if err != nil || code == 0 {
		t.Errorf("a killed process was reported as exit %d, %s; want a failing exit and no error", code, describe(err))
	}
	waitStill(t, sb, dir, "Kill of a process")
	if err := p.Kill(); err != nil {
		t.Errorf("Kill of a process that has exited: %v", err)
	}
}

// beating reports whether both heartbeat files of treeScript exist in
// dir.
func beating(t *testing.T, sb sandbox.Sandbox, dir string) bool {
	for _, f := range []string{"beat.a", "beat.b"} {
		if _, err := sb.Stat(ctx(t), dir+"/"+f); err != nil {
			return false
		}
	}
	return true
}
