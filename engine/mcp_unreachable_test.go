package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// unreachableConfig is two runs whose agent uses the HTTP MCP server at
// url; run "b" takes inputB.
func unreachableConfig(url, inputB, more string) string {
	return fmt.Sprintf(`
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
mcp_server "web" {
  url           = %q
  allowed_tools = ["search"]
}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  mcp_servers  = [mcp_server.web]
}
run "a" {
  agent = agent.a
  input = "first"
}
run "b" {
  agent = agent.a
  input = %q
}
%s`, url, inputB, more)
}

// TestUnreachableMCPServer: once its runs are complete, an HTTP MCP server
// that stopped does not block a plan with nothing to do. A run that would
// execute plans with the tools it recorded, and the plan warns that the
// server is unreachable, naming the run and -refresh=false; a run with
// no recorded tools fails the plan, saying what to do.
func TestUnreachableMCPServer(t *testing.T) {
	tool := "search"
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: tool, InputSchema: objectSchema("")}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	src := unreachableConfig(srv.URL, "second", "")
	e, dir := newTestEngine(t, src)
	planApply(t, e, PlanOptions{})
	plan := func(src string) (*Plan, error) {
		t.Helper()
		e = reload(t, e, dir, src)
		st, err := e.State.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return e.Plan(context.Background(), st, PlanOptions{Refresh: true})
	}

	// A server that answers without an allowed tool still fails the plan:
	// it is reachable, and what it offers changed.
	tool = "find"
	if _, err := plan(src); err == nil || !strings.Contains(err.Error(), `mcp_server.web offers no tool named "search" (allowed_tools); it offers: find`) {
		t.Fatalf("plan with a server that no longer offers an allowed tool: %v", err)
	}

	srv.Close()
	p, err := plan(src)
	if err != nil {
		t.Fatalf("a plan with nothing to do needs the stopped server: %v", err)
	}
	if p.HasChanges() || len(p.Warnings) > 0 {
		t.Fatalf("plan with every run complete: changes %v, warnings %q", p.Summary(), p.Warnings)
	}

	p, err = plan(unreachableConfig(srv.URL, "second, again", ""))
	if err != nil {
		t.Fatalf("a run with recorded tools to execute: %v", err)
	}
	if c := p.Change("run.b"); c.Action != ActionRerun || p.Change("run.a").Action != ActionNoop {
		t.Fatalf("plan: run.a %s, run.b %s", p.Change("run.a").Action, c.Action)
	}
	if len(p.Warnings) != 1 {
		t.Fatalf("warnings %q, want one", p.Warnings)
	}
	for _, want := range []string{"mcp_server.web is unreachable", "run.b", "connection refused", "-refresh=false"} {
		if !strings.Contains(p.Warnings[0], want) {
			t.Errorf("warning %q does not say %q", p.Warnings[0], want)
		}
	}
	if strings.Contains(p.Warnings[0], "run.a") {
		t.Errorf("warning %q names run.a, which does not execute", p.Warnings[0])
	}

	_, err = plan(unreachableConfig(srv.URL, "second", `
run "c" {
  agent = agent.a
  input = "third"
}`))
	if err == nil {
		t.Fatal("a new run whose server is unreachable planned")
	}
	for _, want := range []string{"run.c uses mcp_server.web, which is unreachable", "connection refused", "-refresh=false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
