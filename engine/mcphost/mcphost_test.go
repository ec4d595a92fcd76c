package mcphost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentctl/agentctl/internal/mcptest"
	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/internal/testfiles"
)

// TestMain makes the test binary an MCP server of its own when asked: a
// server with tools that misbehave (crash mid-call, never answer), which
// the go-sdk's examples do not have.
func TestMain(m *testing.M) {
	if os.Getenv("MCPHOST_TEST_SERVER") == "1" {
		runMisbehavingServer()
		return
	}
	os.Exit(m.Run())
}

type echoArgs struct {
	Text string `json:"text"`
}

func runMisbehavingServer() {
	s := mcp.NewServer(&mcp.Implementation{Name: "misbehaving", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo the text"}, func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "exit mid-call"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		os.Stderr.WriteString("about to crash\n")
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "never answer"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		select {}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "a tool error"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such entity"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash_mid_answer", Description: "exit halfway through the answer"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		os.Stdout.WriteString(`{"jsonrpc":"2.0","id":`)
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "exit_after_answer", Description: "answer, then exit"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		go func() {
			time.Sleep(100 * time.Millisecond)
			os.Exit(4)
		}()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "freeze", Description: "hang the whole server"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		stopSelf()
		select {}
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
}

func names(ts []ToolInfo) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Exposed)
	}
	return out
}

func TestStdioEverythingOnHost(t *testing.T) {
	bin := mcptest.Server(t, "everything")
	ctx := context.Background()
	s, err := Connect(ctx, Server{Name: "ev", Command: []string{bin}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := strings.Join(names(s.Tools()), ",")
	// Names that are no function names are offered under safe ones.
	for _, want := range []string{"greet", "greet_structured", "ping"} {
		if !strings.Contains(","+got+",", ","+want+",") {
			t.Errorf("tools %s lack %s", got, want)
		}
	}
	ts := s.AgentTools()
	var greet, structured int = -1, -1
	for i, tl := range ts {
		switch tl.Definition().Name {
		case "greet":
			greet = i
		case "greet_structured":
			structured = i
		}
	}
	def := ts[greet].Definition()
	if def.Description != "say hi" || !strings.Contains(string(def.Parameters), `"name"`) {
		t.Errorf("greet definition %+v", def)
	}
	out, err := ts[greet].Call(ctx, `{"name":"Ada"}`)
	if err != nil || out.Text != "Hi Ada" {
		t.Fatalf("greet: %q, %v", out.Text, err)
	}
	out, err = ts[structured].Call(ctx, `{"name":"Bo"}`)
	if err != nil || !strings.Contains(out.Text, `"message":"Hi Bo"`) {
		t.Fatalf("greet (structured): %q, %v", out.Text, err)
	}
}

func TestAllowedTools(t *testing.T) {
	bin := mcptest.Server(t, "everything")
	ctx := context.Background()
	tools, err := List(ctx, Server{Name: "ev", Command: []string{bin}, AllowedTools: []string{"greet", "ping"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(tools), ","); got != "greet,ping" {
		t.Errorf("allowed tools listed as %s, want greet,ping", got)
	}
	_, err = List(ctx, Server{Name: "ev", Command: []string{bin}, AllowedTools: []string{"greet", "delete_everything"}})
	if err == nil || !strings.Contains(err.Error(), `mcp_server.ev offers no tool named "delete_everything"`) || !strings.Contains(err.Error(), "greet") {
		t.Fatalf("a missing allowed tool gave %v", err)
	}
}

// freeAddr is a free 127.0.0.1 port.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestStreamableHTTPWithHeaders(t *testing.T) {
	bin := mcptest.Server(t, "everything")
	addr := freeAddr(t)
	cmd := exec.Command(bin, "-http", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 200 {
			t.Fatalf("the everything server did not listen on %s", addr)
		}
		time.Sleep(25 * time.Millisecond)
	}
	// A proxy in front of the server records the headers the client sends.
	target, _ := url.Parse("http://" + addr)
	var mu sync.Mutex
	var auth []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	ctx := context.Background()
	s, err := Connect(ctx, Server{Name: "remote", URL: front.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var greet *agentTool
	for _, tl := range s.AgentTools() {
		if tl.Definition().Name == "greet" {
			greet = tl.(*agentTool)
		}
	}
	out, err := greet.Call(ctx, `{"name":"Cy"}`)
	if err != nil || out.Text != "Hi Cy" {
		t.Fatalf("greet over HTTP: %q, %v", out.Text, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) == 0 {
		t.Fatal("no request reached the server")
	}
	for _, a := range auth {
		if a != "Bearer s3cret" {
			t.Fatalf("a request carried Authorization %q", a)
		}
	}
}

func misbehaving(t *testing.T, timeout time.Duration, log *testfiles.SyncBuffer) *Session {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Connect(context.Background(), Server{Name: "bad", Command: []string{exe}, Env: map[string]string{"MCPHOST_TEST_SERVER": "1"}, Timeout: timeout, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestServerCrashMidCallIsAToolErrorAndRestarts(t *testing.T) {
	log := &testfiles.SyncBuffer{}
	s := misbehaving(t, 20*time.Second, log)
	ctx := context.Background()
	_, err := s.Call(ctx, "crash", `{}`)
	if err == nil || !strings.Contains(err.Error(), "mcp_server.bad stopped during the call of crash") {
		t.Fatalf("crash gave %v", err)
	}
	out, err := s.Call(ctx, "echo", `{"text":"again"}`)
	if err != nil || out.Text != "echo: again" {
		t.Fatalf("the call after a crash: %q, %v", out.Text, err)
	}
	if l := log.String(); !strings.Contains(l, "about to crash") || !strings.Contains(l, "starting the server again") {
		t.Errorf("log lacks the server's stderr or the restart:\n%s", l)
	}
	// A tool error is the tool's message, as an error.
	if _, err := s.Call(ctx, "fail", `{}`); err == nil || err.Error() != "no such entity" {
		t.Errorf("a tool error gave %v", err)
	}
}

func TestServerThatNeverAnswersTimesOut(t *testing.T) {
	log := &testfiles.SyncBuffer{}
	s := misbehaving(t, 500*time.Millisecond, log)
	ctx := context.Background()
	start := time.Now()
	_, err := s.Call(ctx, "hang", `{}`)
	if err == nil || !strings.Contains(err.Error(), "tool hang did not answer within 500ms") {
		t.Fatalf("hang gave %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatalf("the call took %s", time.Since(start))
	}
	// The server still serves other calls.
	if out, err := s.Call(ctx, "echo", `{"text":"x"}`); err != nil || out.Text != "echo: x" {
		t.Fatalf("echo after a timeout: %q, %v", out.Text, err)
	}
	if l := log.String(); !strings.Contains(l, "did not answer within") || strings.Contains(l, "starting the server again") {
		t.Errorf("the timeout is not logged, or the server that still answers was restarted:\n%s", l)
	}
	// A cancelled run ends its call at once.
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := s.Call(cctx, "hang", `{}`); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled call gave %v", err)
	}
}

func TestServerThatCannotStart(t *testing.T) {
	_, err := Connect(context.Background(), Server{Name: "nope", Command: []string{"/nonexistent/mcp-server"}, Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "mcp_server.nope") {
		t.Fatalf("a missing program gave %v", err)
	}
}

// running reports whether process pid runs: false once it has exited,
// all its threads with it (a zombie whose leader thread alone exited still
// runs).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) > 0 && f[0] != "Z" && f[0] != "X" {
		return true
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(tasks) > 1
}

func TestCallAfterACrashMidAnswerRestartsTheServer(t *testing.T) {
	log := &testfiles.SyncBuffer{}
	s := misbehaving(t, 20*time.Second, log)
	ctx := context.Background()
	_, err := s.Call(ctx, "crash_mid_answer", `{}`)
	if err == nil || !strings.Contains(err.Error(), "mcp_server.bad stopped during the call of crash_mid_answer") || !strings.Contains(err.Error(), "it is started again for the next call") {
		t.Fatalf("a crash halfway through an answer gave %v", err)
	}
	out, err := s.Call(ctx, "echo", `{"text":"again"}`)
	if err != nil || out.Text != "echo: again" {
		t.Fatalf("the call after the crash: %q, %v", out.Text, err)
	}
}

func TestCallAfterTheServerExitedRestartsIt(t *testing.T) {
	log := &testfiles.SyncBuffer{}
	s := misbehaving(t, 20*time.Second, log)
	ctx := context.Background()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		testenv.Missing(t, "no /proc to see the server exit in")
	}
	out, err := s.Call(ctx, "exit_after_answer", `{}`)
	pid, perr := strconv.Atoi(out.Text)
	if err != nil || perr != nil {
		t.Fatalf("exit_after_answer: %q, %v", out.Text, err)
	}
	// The server is gone between two calls.
	for deadline := time.Now().Add(time.Minute); running(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server (pid %d) did not exit", pid)
		}
	}
	out, err = s.Call(ctx, "echo", `{"text":"again"}`)
	if err != nil || out.Text != "echo: again" {
		t.Fatalf("the call after the server exited: %q, %v\n%s", out.Text, err, log.String())
	}
	if l := log.String(); !strings.Contains(l, "the server stopped since the last call") || !strings.Contains(l, "restart 1 of 3") {
		t.Errorf("the log lacks the stop or the restart:\n%s", l)
	}
}

func TestCallAfterTheServerHungRestartsIt(t *testing.T) {
	if !canStopSelf {
		testenv.Missing(t, "no SIGSTOP to hang the server with")
	}
	log := &testfiles.SyncBuffer{}
	s := misbehaving(t, time.Second, log)
	ctx := context.Background()
	_, err := s.Call(ctx, "freeze", `{}`)
	if err == nil || !strings.Contains(err.Error(), "tool freeze did not answer within 1s, nor did the server answer a ping") || !strings.Contains(err.Error(), "it is started again for the next call") {
		t.Fatalf("a hung server gave %v\n%s", err, log.String())
	}
	out, err := s.Call(ctx, "echo", `{"text":"again"}`)
	if err != nil || out.Text != "echo: again" {
		t.Fatalf("the call after the server hung: %q, %v", out.Text, err)
	}
}

func TestRestartsAreLimited(t *testing.T) {
	log := &testfiles.SyncBuffer{}
	s := misbehaving(t, 20*time.Second, log)
	ctx := context.Background()
	for i := 1; i <= maxRestarts; i++ {
		if _, err := s.Call(ctx, "crash", `{}`); err == nil || !strings.Contains(err.Error(), "it is started again for the next call") {
			t.Fatalf("crash %d gave %v", i, err)
		}
		if out, err := s.Call(ctx, "echo", `{"text":"x"}`); err != nil || out.Text != "echo: x" {
			t.Fatalf("the call after crash %d: %q, %v", i, out.Text, err)
		}
	}
	if _, err := s.Call(ctx, "crash", `{}`); err == nil || !strings.Contains(err.Error(), "is not started again") {
		t.Fatalf("the crash after the last restart gave %v", err)
	}
	_, err := s.Call(ctx, "echo", `{"text":"x"}`)
	if err == nil || !strings.Contains(err.Error(), "mcp_server.bad was started again 3 times in this run, the limit") {
		t.Fatalf("the call after the last restart gave %v", err)
	}
}
