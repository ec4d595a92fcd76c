package tools_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/mcptest"
	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// TestMain lets namespaced local sandboxes start their init from this
// test binary.
func TestMain(m *testing.M) {
	local.MaybeRunInit()
	os.Exit(m.Run())
}

// shell is exec_command and write_stdin over one local sandbox with a
// run's sessions.
type shell struct {
	t        testing.TB
	exec     *tools.ExecCommand
	write    *tools.WriteStdin
	sessions *tools.Sessions
	mark     string
}

func newShell(t testing.TB, iso string, opts tools.ExecOptions, usedBefore int) *shell {
	t.Helper()
	sb, err := local.New(local.Options{Isolation: iso}).Create(context.Background(), sandbox.Spec{Address: "sandbox.t", StateDir: t.TempDir()})
	if err != nil {
		if strings.Contains(err.Error(), "cannot start a command in isolated namespaces") {
			testenv.Missing(t, "user namespaces are unavailable here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Delete(context.Background()) })
	mark := "SESSION_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 10)
	k, v, _ := strings.Cut(mark, "=")
	ws := &sandbox.Workspace{Sandbox: sb, Address: "sandbox.t", Env: map[string]string{k: v}, Scrub: scrubberFor(t)}
	s := tools.NewSessions(usedBefore)
	t.Cleanup(s.Close)
	return &shell{t: t, exec: tools.NewExecCommand(ws, opts, s), write: tools.NewWriteStdin(s, opts), sessions: s, mark: mark}
}

func (s *shell) call(tool tools.Tool, args string) string {
	s.t.Helper()
	out, err := tool.Call(context.Background(), args)
	if err != nil {
		s.t.Fatalf("%s %s: %v", tool.Definition().Name, args, err)
	}
	return out.Text
}

var sessionRE = regexp.MustCompile(`(?m)^Process running with session ID (\d+)$`)

func sessionID(t testing.TB, text string) int {
	t.Helper()
	m := sessionRE.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no session id in\n%s", text)
	}
	id, _ := strconv.Atoi(m[1])
	return id
}

// until polls the session with empty writes until its output, after
// what earlier calls returned (got), holds want: in the output of the
// chunks joined (a line may be split across two reads), or in a chunk's
// header (an exit code). It returns the chunks as returned.
func (s *shell) until(id int, want string, got ...string) string {
	s.t.Helper()
	var all, outs strings.Builder
	add := func(text string) {
		all.WriteString(text)
		_, out, _ := strings.Cut(text, "Output:\n")
		outs.WriteString(out)
	}
	for _, g := range got {
		add(g)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(all.String(), want) && !strings.Contains(outs.String(), want) {
		if time.Now().After(deadline) {
			s.t.Fatalf("session %d never printed %q:\n%s", id, want, all.String())
		}
		add(s.call(s.write, fmt.Sprintf(`{"session_id": %d, "yield_time_ms": 200}`, id)))
	}
	return all.String()
}

func forIsolations(t *testing.T, f func(t *testing.T, iso string)) {
	for _, iso := range []string{local.IsolationNamespaces, local.IsolationNone} {
		t.Run(iso, func(t *testing.T) { f(t, iso) })
	}
}

func TestREPLDrivenAcrossCalls(t *testing.T) {
	forIsolations(t, func(t *testing.T, iso string) {
		s := newShell(t, iso, tools.ExecOptions{}, 0)
		out := s.call(s.exec, `{"cmd": "sh", "tty": true, "yield_time_ms": 300}`)
		id := sessionID(t, out)
		if id != 1 {
			t.Errorf("first session id %d, want 1", id)
		}
		if strings.Contains(out, "Process exited") {
			t.Fatalf("the shell exited at once:\n%s", out)
		}
		got := s.call(s.write, fmt.Sprintf(`{"session_id": %d, "chars": "x=$((20+22)); echo value-$x\n", "yield_time_ms": 100}`, id))
		s.until(id, "value-42", got)
		// A secret the process prints is scrubbed, as exec output is.
		got = s.call(s.write, fmt.Sprintf(`{"session_id": %d, "chars": "echo s3cr3t-value | tr a-z A-Z; echo s3cr3t-value\n"}`, id))
		if all := s.until(id, sandbox.Redacted, got); strings.Contains(all, "s3cr3t-value") || strings.Contains(all, "S3CR3T-VALUE") {
			t.Errorf("a sensitive value reached the model:\n%s", all)
		}
		got = s.call(s.write, fmt.Sprintf(`{"session_id": %d, "chars": "exit 4\n"}`, id))
		out = s.until(id, "Process exited with code 4", got)
		if sessionRE.MatchString(out[strings.LastIndex(out, "Chunk ID"):]) {
			t.Errorf("an exited session still reports its id:\n%s", out)
		}
		// It is gone now.
		_, err := s.write.Call(context.Background(), fmt.Sprintf(`{"session_id": %d}`, id))
		if err == nil || !strings.Contains(err.Error(), "has ended") {
			t.Fatalf("writing to an ended session: %v", err)
		}
	})
}

func TestCommandWaitingForInput(t *testing.T) {
	s := newShell(t, local.IsolationNone, tools.ExecOptions{}, 0)
	id := sessionID(t, s.call(s.exec, `{"cmd": "printf 'name? '; read name; echo hello-$name", "tty": true, "yield_time_ms": 200}`))
	out := s.call(s.write, fmt.Sprintf(`{"session_id": %d, "chars": "ada\n", "yield_time_ms": 5000}`, id))
	if !strings.Contains(out, "hello-ada") || !strings.Contains(out, "Process exited with code 0") {
		t.Fatalf("after the answer:\n%s", out)
	}
}

func TestLongCommandPolledToCompletion(t *testing.T) {
	s := newShell(t, local.IsolationNone, tools.ExecOptions{}, 0)
	out := s.call(s.exec, `{"cmd": "echo started; sleep 1; echo finished", "yield_time_ms": 100}`)
	id := sessionID(t, out)
	if !strings.Contains(out, "started") || strings.Contains(out, "finished") {
		t.Fatalf("the first chunk:\n%s", out)
	}
	// Without a terminal the command reads no input.
	_, err := s.write.Call(context.Background(), fmt.Sprintf(`{"session_id": %d, "chars": "x"}`, id))
	if err == nil || !strings.Contains(err.Error(), "tty=true") {
		t.Fatalf("writing to a session without a terminal: %v", err)
	}
	out = s.until(id, "Process exited with code 0")
	if !strings.Contains(out, "finished") {
		t.Fatalf("the rest of the output:\n%s", out)
	}
	// A command that ends within yield_time_ms is an ordinary result.
	out = s.call(s.exec, `{"cmd": "echo quick", "yield_time_ms": 5000}`)
	if !strings.Contains(out, "Process exited with code 0") || sessionRE.MatchString(out) || !strings.Contains(out, "quick") {
		t.Fatalf("a quick command:\n%s", out)
	}
}

func TestSessionTimeout(t *testing.T) {
	s := newShell(t, local.IsolationNone, tools.ExecOptions{Timeout: 300 * time.Millisecond}, 0)
	id := sessionID(t, s.call(s.exec, `{"cmd": "sleep 30", "yield_time_ms": 50}`))
	out := s.until(id, "Command timed out after 0.300 seconds.")
	if strings.Contains(out, "Process exited") {
		t.Errorf("a timed-out session reports an exit code:\n%s", out)
	}
}

func TestSessionLimitAndClose(t *testing.T) {
	s := newShell(t, local.IsolationNone, tools.ExecOptions{}, 0)
	for i := 1; i <= tools.MaxSessions+1; i++ {
		// exec: one process per session, whether or not the shell runs
		// its last command in its own process (dash does so or not).
		if id := sessionID(t, s.call(s.exec, `{"cmd": "exec sleep 60", "yield_time_ms": 0}`)); id != i {
			t.Fatalf("session %d got id %d", i, id)
		}
	}
	// The 65th pushed out the one unused the longest: the first.
	_, err := s.write.Call(context.Background(), `{"session_id": 1}`)
	if err == nil || !strings.Contains(err.Error(), "closed to make room") {
		t.Fatalf("the oldest session after the limit: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for mcptest.ProcessesWithEnv(s.mark) > tools.MaxSessions {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes, want at most %d", mcptest.ProcessesWithEnv(s.mark), tools.MaxSessions)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The run ends: every session's process is killed.
	s.sessions.Close()
	mcptest.AwaitNoProcesses(t, s.mark, "the sessions after Close")
}

func TestResumedRunHasNoSessions(t *testing.T) {
	s := newShell(t, local.IsolationNone, tools.ExecOptions{}, 3)
	_, err := s.write.Call(context.Background(), `{"session_id": 2, "chars": "x"}`)
	if err == nil || !strings.Contains(err.Error(), "a resumed run starts with no sessions") {
		t.Fatalf("writing to a session of the earlier attempt: %v", err)
	}
	if id := sessionID(t, s.call(s.exec, `{"cmd": "sleep 5", "yield_time_ms": 0}`)); id != 4 {
		t.Fatalf("the resumed run's first session is %d, want 4", id)
	}
	if got := tools.SessionIDsUsed([]string{"Chunk ID: 1\nProcess running with session ID 7\nOutput:\n", "Process running with session ID 3\n"}); got != 7 {
		t.Errorf("SessionIDsUsed = %d, want 7", got)
	}
}

func scrubberFor(t testing.TB) *sandbox.Scrubber {
	if os.Getenv("NOSCRUB") == "1" {
		return nil
	}
	return sandbox.NewScrubber([]string{"s3cr3t-value"})
}
