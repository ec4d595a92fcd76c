package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

var execHeaderRE = regexp.MustCompile(`^Chunk ID: [0-9a-f]{6}\nWall time: \d+\.\d{4} seconds\n`)

// execOutput splits an exec_command result into its header lines and the
// text after "Output:\n".
func execOutput(t *testing.T, text string) (header []string, output string) {
	t.Helper()
	if !execHeaderRE.MatchString(text) {
		t.Fatalf("output does not start with the chunk id and wall time:\n%s", text)
	}
	head, out, ok := strings.Cut(text, "Output:\n")
	if !ok {
		t.Fatalf("no Output: section in\n%s", text)
	}
	return strings.Split(strings.TrimSuffix(head, "\n"), "\n")[2:], out
}

func callExec(t *testing.T, ws *sandbox.Workspace, opts ExecOptions, args string) (Output, error) {
	t.Helper()
	return NewExecCommand(ws, opts, nil).Call(context.Background(), args)
}

func TestExecCommandOutput(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	out, err := callExec(t, ws, ExecOptions{}, `{"cmd": "echo hello; echo oops >&2"}`)
	if err != nil {
		t.Fatal(err)
	}
	header, text := execOutput(t, out.Text)
	if strings.Join(header, "|") != "Process exited with code 0" {
		t.Errorf("header = %q", header)
	}
	if text != "hello\noops\n" {
		t.Errorf("output = %q, want stdout then stderr", text)
	}
}

func TestExecCommandNonZeroExitIsOutput(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	out, err := callExec(t, ws, ExecOptions{}, `{"cmd": "printf 'no such thing'; exit 3"}`)
	if err != nil {
		t.Fatalf("a non-zero exit must be tool output, got error %v", err)
	}
	header, text := execOutput(t, out.Text)
	if header[0] != "Process exited with code 3" || text != "no such thing" {
		t.Errorf("got header %q output %q", header, text)
	}
}

func TestExecCommandWorkdir(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	if err := os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, wd := range []string{"sub/deeper", "/workspace/sub/deeper", "./sub/../sub/deeper"} {
		out, err := callExec(t, ws, ExecOptions{Root: "/workspace"}, `{"cmd": "basename \"$PWD\"", "workdir": "`+wd+`"}`)
		if err != nil {
			t.Fatalf("workdir %s: %v", wd, err)
		}
		if _, text := execOutput(t, out.Text); text != "deeper\n" {
			t.Errorf("workdir %s: ran in %q", wd, text)
		}
	}
}

func TestExecCommandBadArguments(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644)
	for _, tc := range []struct{ args, want string }{
		{`{"cmd": "ls"`, "invalid arguments"},
		{`not json`, "invalid arguments"},
		{`{"cmd": "ls", "color": true}`, `unknown field "color"`},
		{`{"command": ["ls"]}`, `unknown field "command"`},
		{`{}`, `"cmd" is required`},
		{`{"cmd": "   "}`, `"cmd" is required`},
		{`{"cmd": 5}`, "invalid arguments"},
		{`{"cmd": "ls", "yield_time_ms": -1}`, "yield_time_ms"},
		{`{"cmd": "ls", "max_output_tokens": 0}`, "max_output_tokens"},
		{`{"cmd": "ls", "workdir": "../.."}`, "leaves the workspace"},
		{`{"cmd": "ls", "workdir": "/etc"}`, "absolute path"},
		{`{"cmd": "ls", "workdir": "missing"}`, "does not exist"},
		{`{"cmd": "ls", "workdir": "file"}`, "not a directory"},
		{`{"cmd": "ls"} {"cmd": "ls"}`, "trailing data"},
	} {
		_, err := callExec(t, ws, ExecOptions{}, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
	_, err := callExec(t, ws, ExecOptions{}, `{"cmd": "ls", "workdir": "../x"}`)
	if !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("escaping workdir error %v does not wrap ErrPathEscape", err)
	}
}

func TestExecCommandTimeout(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	// The model's yield_time_ms shortens the capability timeout.
	out, err := callExec(t, ws, ExecOptions{Timeout: time.Minute}, `{"cmd": "echo started; sleep 30", "yield_time_ms": 300}`)
	if err != nil {
		t.Fatal(err)
	}
	header, text := execOutput(t, out.Text)
	if len(header) != 0 {
		t.Errorf("a timed-out command has no exit code line, got %q", header)
	}
	if text != "Command timed out after 0.300 seconds.\nstarted\n" {
		t.Errorf("output = %q", text)
	}
	// The capability timeout bounds a larger yield_time_ms.
	out, err = callExec(t, ws, ExecOptions{Timeout: 200 * time.Millisecond}, `{"cmd": "sleep 30", "yield_time_ms": 60000}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, text := execOutput(t, out.Text); text != "Command timed out after 0.200 seconds." {
		t.Errorf("output = %q", text)
	}
}

func TestExecCommandTruncation(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	// 200 lines of 10 bytes = 2000 bytes = 500 tokens.
	cmd := `{"cmd": "i=0; while [ $i -lt 200 ]; do printf 'line %04d\\n' $i; i=$((i+1)); done", "max_output_tokens": 50}`
	out, err := callExec(t, ws, ExecOptions{MaxOutputTokens: 1000}, cmd)
	if err != nil {
		t.Fatal(err)
	}
	header, text := execOutput(t, out.Text)
	if strings.Join(header, "|") != "Process exited with code 0|Original token count: 500" {
		t.Errorf("header = %q", header)
	}
	if len(text) > 200 {
		t.Errorf("output is %d bytes, want at most 50 tokens (200 bytes)", len(text))
	}
	if !strings.HasPrefix(text, "Total output lines: 200\n\nline 0000\n") || !strings.HasSuffix(text, "line 0199\n") {
		t.Errorf("want head and tail kept, got %q", text)
	}
	if !regexp.MustCompile(`…\d+ tokens truncated…`).MatchString(text) {
		t.Errorf("no truncation marker in %q", text)
	}
	// The capability's cap applies when the model asks for more.
	out, _ = callExec(t, ws, ExecOptions{MaxOutputTokens: 25}, strings.Replace(cmd, `"max_output_tokens": 50`, `"max_output_tokens": 5000`, 1))
	if _, text := execOutput(t, out.Text); len(text) > 100 {
		t.Errorf("capability cap of 25 tokens ignored: %d bytes", len(text))
	}
}

func TestExecCommandEnvAndScrubbing(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	ws.Env = map[string]string{"REGION": "eu"}
	ws.EphemeralEnv = map[string]string{"DB_TOKEN": "s3cr3t-token"}
	ws.Scrub = sandbox.NewScrubber([]string{"s3cr3t-token"})
	out, err := callExec(t, ws, ExecOptions{}, `{"cmd": "echo $REGION $DB_TOKEN"}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, text := execOutput(t, out.Text); text != "eu (sensitive)\n" {
		t.Errorf("output = %q, want env set and the secret scrubbed", text)
	}
}

func TestExecCommandShellAndTTY(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	out, err := callExec(t, ws, ExecOptions{}, `{"cmd": "echo $0", "shell": "/bin/sh", "login": false, "tty": true}`)
	if err != nil {
		t.Fatal(err)
	}
	_, text := execOutput(t, out.Text)
	if text != "Sessions are not available here (a chat turn or a tool called by hand runs its commands to completion); the command ran once with plain pipes.\n/bin/sh\n" {
		t.Errorf("output = %q", text)
	}
}

func TestToolPath(t *testing.T) {
	for _, tc := range []struct{ root, in, want, err string }{
		{"/workspace", "a/b.txt", "a/b.txt", ""},
		{"/workspace", "./a//b/../c", "a/c", ""},
		{"/workspace", ".", "", ""},
		{"/workspace", "/workspace", "", ""},
		{"/workspace", "/workspace/a/b", "a/b", ""},
		{"/workspace/", "/workspace/a", "a", ""},
		{"/workspace", "/workspace/../etc/passwd", "", "leaves the workspace"},
		{"/workspace", "a/../../workspace/x", "", "leaves the workspace"},
		{"/workspace", "/workspacefoo/x", "", "outside"},
		{"/workspace", "/etc/passwd", "", "outside the workspace root /workspace"},
		{"", "/etc/passwd", "", "absolute path"},
		{"/workspace", "..", "", "leaves"},
		{"/workspace", "a/../../b", "", "leaves"},
		{"/workspace", "a\\b", "", "backslash"},
		{"/workspace", "a\x00b", "", "NUL"},
		{"/workspace", "", "", "empty"},
		{"/", "/etc/x", "etc/x", ""},
	} {
		got, err := toolPath(tc.root, tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("toolPath(%q, %q) error = %v, want %q", tc.root, tc.in, err, tc.err)
			}
			if tc.in != "" && !errors.Is(err, sandbox.ErrPathEscape) {
				t.Errorf("toolPath(%q, %q) error %v does not wrap ErrPathEscape", tc.root, tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("toolPath(%q, %q) = %q, %v; want %q", tc.root, tc.in, got, err, tc.want)
		}
	}
}

func TestExecCommandCancelled(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	_, err := NewExecCommand(ws, ExecOptions{}, nil).Call(ctx, `{"cmd": "sleep 30"}`)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

// lossySandbox runs commands on the host but, as a runtime that closes
// exec streams early would, keeps only the first half of stdout and
// reports the loss.
type lossySandbox struct{ *hostSandbox }

func (l lossySandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res, err := l.hostSandbox.Exec(ctx, req)
	if err != nil {
		return res, err
	}
	res.Stdout = res.Stdout[:len(res.Stdout)/2]
	res.OriginalStdout = int64(len(res.Stdout))
	return res, fmt.Errorf("exec in Pod p: %w", sandbox.ErrOutputLost)
}

// A command whose output's end was lost in transit ran: the model gets
// its exit status and what arrived, told that the end is missing, not a
// failure that invites running it again.
func TestExecCommandOutputLost(t *testing.T) {
	dir := t.TempDir()
	ws := &sandbox.Workspace{Sandbox: lossySandbox{newHostSandbox(t, dir)}}
	out, err := callExec(t, ws, ExecOptions{}, `{"cmd": "echo first-half; echo second; exit 4"}`)
	if err != nil {
		t.Fatalf("a lost output end must be tool output, got error %v", err)
	}
	header, text := execOutput(t, out.Text)
	if out.ExitCode == nil || *out.ExitCode != 4 || header[0] != "Process exited with code 4" || !strings.HasPrefix(text, OutputLostNotice+"\nfirst-") || strings.Contains(text, "second") {
		t.Fatalf("exit %v, header %q, output %q", out.ExitCode, header, text)
	}
}
