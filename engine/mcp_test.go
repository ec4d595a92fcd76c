package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/mcptest"
)

// mcpConfig is a pipeline whose agent uses the go-sdk's memory example
// server (a knowledge graph) over stdio on the host. server is the
// mcp_server block's body.
func mcpConfig(bin, kb, server string) string {
	return fmt.Sprintf(`
provider "scripted" {
  script "librarian" {
    reply {
      call "create_entities" {
        arguments = { entities = [{ name = "Ada", entityType = "person", observations = ["wrote the first program"] }] }
      }
    }
    reply {
      call "read_graph" {
        arguments = {}
      }
    }
    reply { text = "recorded" }
  }
}
mcp_server "kb" {
  command = [%q, "-memory", %q]
  %s
}
agent "librarian" {
  provider     = provider.scripted
  instructions = "Keep the knowledge graph."
  mcp_servers  = [mcp_server.kb]
}
run "record" {
  agent = agent.librarian
  input = "Record Ada."
}
`, bin, kb, server)
}

func toolOutputs(steps []agentloop.Step) map[string]string {
	out := map[string]string{}
	for _, s := range steps {
		if s.Kind == agentloop.StepTool && s.Result != nil {
			out[s.Result.CallID] = s.Result.Output
		}
	}
	return out
}

func TestMCPServerToolsInARun(t *testing.T) {
	bin := mcptest.Server(t, "memory")
	kb := filepath.Join(t.TempDir(), "kb.json")
	src := mcpConfig(bin, kb, `allowed_tools = ["create_entities", "read_graph"]`)
	e, dir := newTestEngine(t, src)
	st := planApply(t, e, PlanOptions{})
	r := st.Runs["run.record"]
	if r == nil || r.Status != RunCompleted || string(r.Output) != `"recorded"` {
		t.Fatalf("run.record = %+v", r)
	}
	outs := toolOutputs(journalSteps(t, e, st, "run.record"))
	all := ""
	for _, o := range outs {
		all += o + "\n"
	}
	if !strings.Contains(all, "wrote the first program") || strings.Contains(all, "error") {
		t.Fatalf("tool outputs do not show the graph the server kept:\n%s", all)
	}
	// The server really ran: it wrote its knowledge base.
	if b, err := os.ReadFile(kb); err != nil || !strings.Contains(string(b), "Ada") {
		t.Fatalf("the server's knowledge base: %q, %v", b, err)
	}
	// The run records the server's tools (names and schemas by digest).
	if got := string(r.Attributes["mcp_server.kb.tools"].Value); got != `["create_entities","read_graph"]` {
		t.Errorf("recorded tools %s", got)
	}
	if r.Attributes["mcp_server.kb.tools.read_graph"].Digest == "" {
		t.Errorf("no schema digest recorded for read_graph: %+v", r.Attributes)
	}
	if _, err := os.Stat(e.MCPLogPath(readState(t, e).Lineage, "run.record", "kb")); err != nil {
		t.Errorf("no log for the server's stderr: %v", err)
	}
	// Unchanged: nothing to do.
	if a := planActions(t, e)["run.record"]; a != ActionNoop {
		t.Fatalf("an unchanged pipeline plans %s", a)
	}
	// Another allowed tool changes what the run may do: it runs again,
	// and plan says why.
	e = reload(t, e, dir, mcpConfig(bin, kb, `allowed_tools = ["create_entities", "read_graph", "search_nodes"]`))
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(context.Background(), st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Change("run.record")
	if c.Action != ActionRerun || !strings.Contains(strings.Join(c.Reasons, "\n"), "mcp_server.kb") {
		t.Fatalf("plan after adding a tool: %s %q", c.Action, c.Reasons)
	}
	if !strings.Contains(c.Attributes["input"], "Record Ada") {
		t.Errorf("plan attributes %v", c.Attributes)
	}
	// The plan applied by another process (a saved plan: no tools listed
	// there yet) still re-runs it and records the new tools.
	e2 := reload(t, e, dir, mcpConfig(bin, kb, `allowed_tools = ["create_entities", "read_graph", "search_nodes"]`))
	if err := e2.Apply(context.Background(), st, p); err != nil {
		t.Fatal(err)
	}
	r = st.Runs["run.record"]
	if got := string(r.Attributes["mcp_server.kb.tools"].Value); r.Status != RunCompleted || got != `["create_entities","read_graph","search_nodes"]` {
		t.Fatalf("after applying the plan elsewhere: %s, tools %s", r.Status, got)
	}
}

func TestMCPToolClashFailsPlan(t *testing.T) {
	bin := mcptest.Server(t, "memory")
	kb := filepath.Join(t.TempDir(), "kb.json")
	src := mcpConfig(bin, kb, `allowed_tools = ["read_graph"]`) + fmt.Sprintf(`
mcp_server "kb2" {
  command = [%q]
}
agent "other" {
  provider     = provider.scripted
  instructions = "x"
  mcp_servers  = [mcp_server.kb, mcp_server.kb2]
}
run "other" {
  agent = agent.other
  input = "x"
}
`, bin)
	e, _ := newTestEngine(t, src)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Plan(context.Background(), st, PlanOptions{Refresh: true})
	if err == nil || !strings.Contains(err.Error(), `agent "other" gets tool "read_graph" from both mcp_server.kb and mcp_server.kb2`) {
		t.Fatalf("plan with a clash: %v", err)
	}
}

func TestMCPToolNeedsApproval(t *testing.T) {
	bin := mcptest.Server(t, "memory")
	kb := filepath.Join(t.TempDir(), "kb.json")
	e, _ := newTestEngine(t, mcpConfig(bin, kb, `needs_approval = { create_entities = true }`))
	st := planApply(t, e, PlanOptions{})
	r := st.Runs["run.record"]
	if r == nil || r.Status != RunAwaiting {
		t.Fatalf("run.record = %+v, want awaiting approval", r)
	}
	if p := r.Pending(); len(p) != 1 || p[0].Tool != "create_entities" {
		t.Fatalf("pending = %+v", p)
	}
	if _, err := os.Stat(kb); err == nil {
		t.Fatal("the server was called before approval")
	}
}

func TestMCPServerThatCannotStartFailsPlan(t *testing.T) {
	e, _ := newTestEngine(t, mcpConfig("/nonexistent/kb-server", "kb.json", ""))
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Plan(context.Background(), st, PlanOptions{Refresh: true})
	if err == nil || !strings.Contains(err.Error(), "listing the tools of mcp_server.kb: mcp_server.kb did not start") {
		t.Fatalf("plan with a server that cannot start: %v", err)
	}
}

// TestMCPServerChangeReRunsFromASavedPlan: the same command now starts a
// server with other tools; a plan says the run re-runs, and applying that
// plan from another engine (which has listed nothing yet) re-runs it.
func TestMCPServerChangeReRunsFromASavedPlan(t *testing.T) {
	memory := mcptest.Server(t, "memory")
	everything := mcptest.Server(t, "everything")
	dir := t.TempDir()
	server := filepath.Join(dir, "kb-server")
	link := func(target string) {
		if err := os.WriteFile(server, []byte("#!/bin/sh\nexec "+target+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link(memory)
	src := mcpConfig(server, filepath.Join(dir, "kb.json"), "")
	e, cdir := newTestEngine(t, src)
	planApply(t, e, PlanOptions{})
	link(everything)
	e = reload(t, e, cdir, src)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(context.Background(), st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Change("run.record"); c.Action != ActionRerun || !strings.Contains(strings.Join(c.Reasons, "\n"), "mcp_server.kb: tools") {
		t.Fatalf("plan after the server changed: %s %q", c.Action, c.Reasons)
	}
	e2 := reload(t, e, cdir, src)
	if err := e2.Apply(context.Background(), st, p); err != nil {
		t.Fatal(err)
	}
	if got := string(st.Runs["run.record"].Attributes["mcp_server.kb.tools"].Value); !strings.Contains(got, "greet") {
		t.Fatalf("the re-run recorded tools %s", got)
	}
}
