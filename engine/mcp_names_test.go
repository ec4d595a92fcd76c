package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	st, err := e.State.Read()
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
	st, err := e.State.Read()
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Plan(context.Background(), st, PlanOptions{Refresh: true})
	if err == nil || !strings.Contains(err.Error(), `agent "a" gets tool "write_stdin" from both capability.shell.default and mcp_server.kb`) {
		t.Fatalf("plan with a clash: %v", err)
	}
}
