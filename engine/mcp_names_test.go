package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentctl/agentctl/internal/fakeopenai"
)

// mcpHTTPServer serves, over streamable HTTP, the MCP server tools
// builds for each request (from its headers): an in-process server whose
// tool list the test chooses.
func mcpHTTPServer(t *testing.T, tools func(r *http.Request) []*mcp.Tool) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
		for _, tl := range tools(r) {
			s.AddTool(tl, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "called " + req.Params.Name}}}, nil
			})
		}
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func objectSchema(props string) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
}

// TestMCPToolNamesThatSanitizeAlikeFailPlan: a server listing "a b" and
// "a_b" would give the model two tools named a_b, one of them out of
// reach. Plan fails, naming both and the server, and saying how to fix
// it; so does a run started from a plan made before the server changed.
func TestMCPToolNamesThatSanitizeAlikeFailPlan(t *testing.T) {
	clash := true
	url := mcpHTTPServer(t, func(*http.Request) []*mcp.Tool {
		ts := []*mcp.Tool{{Name: "a_b", InputSchema: objectSchema("")}}
		if clash {
			ts = append(ts, &mcp.Tool{Name: "a b", InputSchema: objectSchema("")})
		}
		return ts
	})
	src := fmt.Sprintf(`
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
mcp_server "kb" {
  url = %q
}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  mcp_servers  = [mcp_server.kb]
}
run "r" {
  agent = agent.a
  input = "x"
}
`, url)
	e, dir := newTestEngine(t, src)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = e.Plan(ctx, st, PlanOptions{Refresh: true})
	wantClash := func(err error) {
		t.Helper()
		msg := fmt.Sprint(err)
		for _, want := range []string{`mcp_server.kb`, `"a_b"`, `"a b"`, `allowed_tools`} {
			if !strings.Contains(msg, want) {
				t.Fatalf("the error does not name %s: %v", want, err)
			}
		}
	}
	wantClash(err)

	// A plan made while the server listed one of them, applied after it
	// lists both: the run fails before anything of it is recorded.
	clash = false
	p, err := e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	clash = true
	e2 := reload(t, e, dir, src)
	err = e2.Apply(ctx, st, p)
	wantClash(err)
	if r := st.Runs["run.r"]; r != nil {
		t.Fatalf("the run started with a tool out of reach: %+v", r)
	}
}

// TestMCPToolDescriptionsAreScrubbedOnTheWire: an MCP server given a
// sensitive token (a header here, as env for a stdio server) puts it in
// a tool's name, description and input schema, plainly and in base64.
// The requests the model provider receives hold neither form, and the
// tool whose name held it can still be called; plan does not show it.
func TestMCPToolDescriptionsAreScrubbedOnTheWire(t *testing.T) {
	const token = "kbtok-7f3a9c2e51d84b06"
	b64 := base64.StdEncoding.EncodeToString([]byte(token))
	url := mcpHTTPServer(t, func(r *http.Request) []*mcp.Tool {
		tok := r.Header.Get("X-KB-Token")
		b := base64.StdEncoding.EncodeToString([]byte(tok))
		return []*mcp.Tool{
			{
				Name:        "search",
				Description: "Search the knowledge base as " + tok + " (basic auth " + b + ").",
				InputSchema: objectSchema(fmt.Sprintf(
					`"query":{"type":"string","description":"sent with %s"},"%s":{"type":"string","enum":["%s","%s"]}`, tok, tok, tok, b)),
			},
			{Name: "lookup_" + tok, InputSchema: objectSchema("")},
		}
	})
	srv := fakeopenai.New(t)
	srv.Enqueue(
		fakeopenai.Calls(fakeopenai.FunctionCall("call_1", "lookup__sensitive", `{}`)),
		fakeopenai.Text("done"),
	)
	e, _ := newTestEngine(t, fmt.Sprintf(`
variable "tok" {
  type      = string
  sensitive = true
  default   = %q
}
provider "openai" {
  base_url    = %q
  max_retries = 0
}
mcp_server "kb" {
  url     = %q
  headers = { X-KB-Token = var.tok }
}
agent "a" {
  model       = "gpt-test"
  mcp_servers = [mcp_server.kb]
}
run "r" {
  agent = agent.a
  input = "Find the Q3 report."
}
`, token, srv.URL, url))
	e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
	var events []string
	e.Events = func(ev Event) { events = append(events, ev.Message) }
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	shown, _ := json.Marshal(p)
	for _, form := range []string{token, b64} {
		if strings.Contains(string(shown), form) || strings.Contains(strings.Join(events, "\n"), form) {
			t.Errorf("plan shows %q: %s\n%s", form, shown, strings.Join(events, "\n"))
		}
	}
	if err := e.Apply(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	if out := string(st.Runs["run.r"].Output); out != `"done"` {
		t.Fatalf("run output %s", out)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		body := string(r.Body)
		if !strings.Contains(body, "Search the knowledge base") {
			t.Fatalf("request %d does not offer the search tool: %s", r.Seq, body)
		}
		for _, form := range []string{token, b64} {
			if strings.Contains(body, form) {
				t.Errorf("request %d carries %q: %s", r.Seq, form, body)
			}
		}
	}
	if !strings.Contains(string(reqs[1].Body), "called lookup_") {
		t.Errorf("the renamed tool did not reach the server's lookup tool: %s", reqs[1].Body)
	}
}

// TestMCPToolClashesWithWriteStdinFailsPlan: a shell capability gives
// write_stdin with exec_command (in a sandbox that runs interactive
// sessions), so a server tool of that name is a clash plan reports.
func TestMCPToolClashesWithWriteStdinFailsPlan(t *testing.T) {
	url := mcpHTTPServer(t, func(*http.Request) []*mcp.Tool {
		return []*mcp.Tool{{Name: "write_stdin", InputSchema: objectSchema("")}}
	})
	e, _ := newTestEngine(t, fmt.Sprintf(`
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
manifest "m" {}
sandbox "s" {
  provider = provider.local
  manifest = manifest.m
}
capability "shell" "default" {}
mcp_server "kb" {
  url = %q
}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  sandbox      = sandbox.s
  capabilities = [capability.shell.default]
  mcp_servers  = [mcp_server.kb]
}
run "r" {
  agent = agent.a
  input = "x"
}
`, url))
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Plan(context.Background(), st, PlanOptions{Refresh: true})
	if err == nil || !strings.Contains(err.Error(), `agent "a" gets tool "write_stdin" from both capability.shell.default and mcp_server.kb`) {
		t.Fatalf("plan with a clash: %v", err)
	}
}
