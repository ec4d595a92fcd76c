package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/internal/ttytest"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

func TestManifestUsers(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Image = k8stest.UsersImage
	spec.Accounts = sandboxtest.Accounts()
	sb := c.newSandbox(t, spec)
	ctx := context.Background()

	res := sandboxtest.ExecAs(t, sb, "alice", "id; pwd", 0)
	want := "uid=2001(alice) gid=2001(alice) groups=2001(alice),3000(dev)\n/workspace\n"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Fatalf("id as alice = %q (exit %d, %s), want %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
	res = sandboxtest.ExecAs(t, sb, "alice", "echo hi > a.txt && stat -c %U:%G a.txt", 0)
	if got := strings.TrimSpace(string(res.Stdout)); got != "alice:alice" {
		t.Fatalf("owner of a.txt = %q (%s), want alice:alice", got, res.Stderr)
	}
	if res := sandboxtest.ExecAs(t, sb, "bob", "mkdir -m 700 mine && echo b > mine/f && echo b > b.txt", 0); res.ExitCode != 0 {
		t.Fatalf("bob writing his files: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err := sb.WriteFile(ctx, "root.txt", []byte("r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sandboxtest.CheckDenied(t, sb, "alice", 0, "echo x > mine/g", "cat mine/f", "rm -f b.txt", "echo x >> b.txt", "echo x >> root.txt")
	sandboxtest.CheckProcessUser(t, sb, "bob", "id -un", true, "bob")
	sandboxtest.CheckProcessUser(t, sb, "bob", "id -un", false, "bob")
	// The environment reaches a command run as another user.
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: `echo "$GREETING"`, User: "alice", Env: map[string]string{"GREETING": "hi 'there'"}})
	if err != nil || string(res.Stdout) != "hi 'there'\n" {
		t.Fatalf("env as alice: %q %v", res.Stdout, err)
	}
	// A timeout kills a user's process tree too.
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Shell: "sleep 1007 & sleep 1008", User: "alice", Timeout: time.Second})
	if err != nil || !res.TimedOut {
		t.Fatalf("timeout as alice: %+v %v", res, err)
	}
	if ps := execOK(t, sb, "ps -o args"); strings.Contains(ps, "sleep 100") {
		t.Fatalf("alice's processes left after timeout:\n%s", ps)
	}
	ws := &sandbox.Workspace{Sandbox: sb}
	ct, err := tools.NewCommandTool(ws, "whoami", "who runs me", nil, []string{"id", "-un"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ct.RunAs("alice").Call(ctx, "{}")
	if err != nil || !strings.Contains(o.Text, "alice") {
		t.Errorf("command tool with run_as alice: %q, %v", o.Text, err)
	}
	sandboxtest.CheckUnknownUser(t, sb)
	if err := sb.createAccounts(ctx); err != nil {
		t.Errorf("creating the accounts again: %v", err)
	}
}

// An image without account tools is refused with its name, and nothing
// is left behind.
func TestManifestUsersWithoutTools(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Accounts = sandboxtest.Accounts()
	sb, err := c.p.Create(context.Background(), spec)
	if err == nil {
		sb.Delete(context.Background())
		t.Fatal("Create succeeded in an image without adduser or useradd")
	}
	mustContain(t, "no tools", err.Error(), k8stest.Image, "useradd or adduser", "no tools to create them")
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestStartProcessOnATerminal(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	sb := c.newSandbox(t, testSpec(t))
	p, err := sb.StartProcess(context.Background(), sandbox.ProcessRequest{Argv: []string{"sh", "-i"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	ttytest.DriveShell(t, p)
}

// exec_command and write_stdin drive busybox sh on a terminal in the
// Pod; the last output of a terminal command is not lost.
func TestSessionsInPod(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	sb := c.newSandbox(t, testSpec(t))
	ctx := context.Background()
	ws := &sandbox.Workspace{Sandbox: sb, Address: "sandbox.test"}
	sessions := tools.NewSessions(0)
	defer sessions.Close()
	exec := tools.NewExecCommand(ws, tools.ExecOptions{Root: "/workspace"}, sessions)
	write := tools.NewWriteStdin(sessions, tools.ExecOptions{})
	call := func(tl tools.Tool, args string) string {
		t.Helper()
		out, err := tl.Call(ctx, args)
		if err != nil {
			t.Fatalf("%s %s: %v", tl.Definition().Name, args, err)
		}
		return out.Text
	}
	if out := call(exec, `{"cmd": "sh", "tty": true, "yield_time_ms": 300}`); !strings.Contains(out, "Process running with session ID 1") {
		t.Fatalf("starting sh:\n%s", out)
	}
	got := call(write, `{"session_id": 1, "chars": "echo product-$((6*7))\n", "yield_time_ms": 1000}`)
	for i := 0; !strings.Contains(got, "product-42") && i < 50; i++ {
		got += call(write, `{"session_id": 1, "yield_time_ms": 200}`)
	}
	if !strings.Contains(got, "product-42") {
		t.Fatalf("the REPL did not answer:\n%s", got)
	}
	// Output printed as the terminal command exits arrives in full.
	out := call(exec, `{"cmd": "seq 1 3000 | tail -n 1; echo last-line", "tty": true, "yield_time_ms": 5000}`)
	if !strings.Contains(out, "3000") || !strings.Contains(out, "last-line") {
		t.Fatalf("terminal command's last output:\n%s", out)
	}
	out = call(exec, `{"cmd": "echo begun; sleep 1; echo ended", "yield_time_ms": 100}`)
	_, id, ok := strings.Cut(out, "Process running with session ID ")
	if !ok {
		t.Fatalf("the long command:\n%s", out)
	}
	id = strings.Fields(id)[0]
	for i := 0; !strings.Contains(out, "Process exited with code 0") && i < 100; i++ {
		out += call(write, `{"session_id": `+id+`, "yield_time_ms": 200}`)
	}
	if !strings.Contains(out, "ended") || !strings.Contains(out, "Process exited with code 0") {
		t.Fatalf("polling the long command:\n%s", out)
	}
	call(exec, `{"cmd": "sleep 301", "yield_time_ms": 0}`)
	const count = `grep -l "30[1]" /proc/[0-9]*/cmdline 2>/dev/null | wc -l`
	deadline := time.Now().Add(15 * time.Second)
	for strings.TrimSpace(execOK(t, sb, count)) == "0" {
		if time.Now().After(deadline) {
			t.Fatal("no session process in the Pod while it runs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	sessions.Close()
	deadline = time.Now().Add(15 * time.Second)
	for strings.TrimSpace(execOK(t, sb, count)) != "0" {
		if time.Now().After(deadline) {
			t.Fatal("a session process is left in the Pod after Close")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
