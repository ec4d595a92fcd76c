package daytona

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/engine/tools/toolstest"
	"github.com/agentctl/agentctl/internal/mcptest"
	"github.com/agentctl/agentctl/internal/ttytest"
	"github.com/agentctl/agentctl/sandbox"
)

// TestStartProcessStreams: an attached process gets what is written to
// its stdin (send-input) and its output comes back as it appears (logs).
func TestStartProcessStreams(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	p, err := w.StartProcess(ctx, sandbox.ProcessRequest{Shell: `while read -r l; do echo "got $l"; echo "err $l" >&2; [ "$l" = quit ] && exit 4; done`})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	if _, err := io.WriteString(p.Stdin(), "one\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(p.Stdout(), buf, len("got one\n"))
	if err != nil || string(buf[:n]) != "got one\n" {
		t.Fatalf("first answer %q, %v", buf[:n], err)
	}
	io.WriteString(p.Stdin(), "quit\n")
	rest, _ := io.ReadAll(p.Stdout())
	if string(rest) != "got quit\n" {
		t.Errorf("rest of stdout %q", rest)
	}
	if code, err := p.Wait(); err != nil || code != 4 {
		t.Fatalf("exit %d, %v", code, err)
	}
	reqs := strings.Join(e.fake.Requests(), "\n")
	if !strings.Contains(reqs, "/input") || !strings.Contains(reqs, "DELETE /toolbox/"+w.ID()+"/process/session/") {
		t.Errorf("no send-input or no session deleted:\n%s", reqs)
	}
}

// TestMCPServerInDaytonaSandbox runs the go-sdk's everything server as an
// attached process of the Daytona sandbox (the fake runs it on this
// machine): listed, called, and killed when the session closes.
func TestMCPServerInDaytonaSandbox(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	mark := "MCP_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 10)
	s := toolstest.EverythingIn(t, w, map[string]string{"MCP_MARK": strings.TrimPrefix(mark, "MCP_MARK=")}, nil)
	out, err := s.Call(ctx, "greet", `{"name":"daytona"}`)
	if err != nil || out.Text != "Hi daytona" {
		t.Fatalf("greet: %q, %v", out.Text, err)
	}
	if mcptest.ProcessesWithEnv(mark) == 0 {
		t.Fatal("no server process carries the sandbox's environment")
	}
	s.Close()
	mcptest.AwaitNoProcesses(t, mark, "the server after Close")
}

// TestSessionsOnDaytona: a long command yields a session that polling
// carries to completion; on a terminal, a REPL is driven across calls.
func TestSessionsOnDaytona(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	ctx := context.Background()
	ws := &sandbox.Workspace{Sandbox: w, Address: "sandbox.d"}
	sessions := tools.NewSessions(0)
	defer sessions.Close()
	exec := tools.NewExecCommand(ws, tools.ExecOptions{}, sessions)
	write := tools.NewWriteStdin(sessions, tools.ExecOptions{})
	out, err := exec.Call(ctx, `{"cmd": "echo begun; sleep 0.5; echo ended", "yield_time_ms": 50}`)
	if err != nil || !strings.Contains(out.Text, "Process running with session ID 1") {
		t.Fatalf("the long command: %q, %v", out.Text, err)
	}
	text := out.Text
	for i := 0; !strings.Contains(text, "Process exited with code 0") && i < 100; i++ {
		o, err := write.Call(ctx, `{"session_id": 1, "yield_time_ms": 200}`)
		if err != nil {
			t.Fatal(err)
		}
		text += o.Text
	}
	if !strings.Contains(text, "begun") || !strings.Contains(text, "ended") || !strings.Contains(text, "Process exited with code 0") {
		t.Fatalf("polling:\n%s", text)
	}
	// On a terminal (a PTY session): a REPL driven across calls.
	out, err = exec.Call(ctx, `{"cmd": "sh", "tty": true, "yield_time_ms": 300}`)
	if err != nil || !strings.Contains(out.Text, "Process running with session ID 2") {
		t.Fatalf("sh on a terminal: %q, %v", out.Text, err)
	}
	text = ""
	o, err := write.Call(ctx, `{"session_id": 2, "chars": "echo product-$((6*7))\n", "yield_time_ms": 300}`)
	if err != nil {
		t.Fatal(err)
	}
	text = o.Text
	for i := 0; !strings.Contains(text, "product-42") && i < 100; i++ {
		o, _ := write.Call(ctx, `{"session_id": 2, "yield_time_ms": 100}`)
		text += o.Text
	}
	if !strings.Contains(text, "product-42") {
		t.Fatalf("the REPL on Daytona:\n%s", text)
	}
	o, _ = write.Call(ctx, `{"session_id": 2, "chars": "exit 6\n", "yield_time_ms": 2000}`)
	text = o.Text
	for i := 0; !strings.Contains(text, "Process exited with code 6") && i < 100; i++ {
		o, err := write.Call(ctx, `{"session_id": 2, "yield_time_ms": 100}`)
		if err != nil {
			t.Fatalf("%v after:\n%s", err, text)
		}
		text += o.Text
	}
}

// TestStartProcessOnATerminal drives a shell in a PTY session.
func TestStartProcessOnATerminal(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	p, err := w.StartProcess(context.Background(), sandbox.ProcessRequest{Argv: []string{"sh", "-i"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	ttytest.DriveShell(t, p)
	reqs := strings.Join(e.fake.Requests(), "\n")
	for _, want := range []string{"POST /toolbox/" + w.ID() + "/process/pty", "/connect", "DELETE /toolbox/" + w.ID() + "/files"} {
		if !strings.Contains(reqs, want) {
			t.Errorf("no %q among the requests:\n%s", want, reqs)
		}
	}
}

// TestKillPtyProcess: Kill deletes the PTY session, which kills the
// command; its exit is SIGKILL's.
func TestKillPtyProcess(t *testing.T) {
	e := newEnv(t)
	w := e.create(t)
	p, err := w.StartProcess(context.Background(), sandbox.ProcessRequest{Shell: "sleep 100", TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stdout())
	go io.Copy(io.Discard, p.Stderr())
	done := make(chan struct{})
	go func() { p.Kill(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Kill did not return")
	}
	if code, err := p.Wait(); err != nil || code != 137 {
		t.Fatalf("exit %d, %v; want 137", code, err)
	}
	if reqs := strings.Join(e.fake.Requests(), "\n"); !strings.Contains(reqs, "DELETE /toolbox/"+w.ID()+"/process/pty/") {
		t.Errorf("the PTY session was not deleted:\n%s", reqs)
	}
}
