package config

import (
	"strings"
	"testing"
)

const mcpAgents = `
provider "scripted" {
  script "a" {
    reply { text = "ok" }
  }
}
provider "local" {}
sandbox "box" {
  provider = provider.local
}
variable "token" {
  default   = "s3cret-token"
  sensitive = true
}
`

func TestMCPServerBlocks(t *testing.T) {
	cfg := mustLoad(t, map[string]string{"main.hcl": mcpAgents + `
mcp_server "kb" {
  command        = ["kb-server", "--db", "kb.json"]
  env            = { KB_TOKEN = var.token, KB_MODE = "ro" }
  sandbox        = sandbox.box
  allowed_tools  = ["search", "read", "delete_entity"]
  needs_approval = { delete_entity = true }
  timeout        = "5s"
}
mcp_server "remote" {
  url     = "https://mcp.example.com/mcp"
  headers = { Authorization = "Bearer ${var.token}", "X-Team" = "data" }
}
agent "a" {
  provider    = provider.scripted
  mcp_servers = [mcp_server.kb, mcp_server.remote]
}
`}, Options{})
	kb := cfg.MCPServers["kb"]
	if kb == nil || strings.Join(kb.Command, " ") != "kb-server --db kb.json" || kb.Sandbox != "sandbox.box" || kb.Timeout.String() != "5s" {
		t.Fatalf("kb = %+v", kb)
	}
	if strings.Join(kb.SensitiveEnv, ",") != "KB_TOKEN" || kb.Env["KB_MODE"] != "ro" {
		t.Errorf("kb env %v, sensitive %v", kb.Env, kb.SensitiveEnv)
	}
	if ask, _ := kb.NeedsApproval.ForTool("delete_entity").NeedsApproval(Call{Tool: "delete_entity", Arguments: "{}"}); !ask {
		t.Error("delete_entity does not need approval")
	}
	if ask, _ := kb.NeedsApproval.ForTool("search").NeedsApproval(Call{Tool: "search", Arguments: "{}"}); ask {
		t.Error("search needs approval")
	}
	r := cfg.MCPServers["remote"]
	if r.URL != "https://mcp.example.com/mcp" || strings.Join(r.SensitiveHeaders, ",") != "Authorization" || r.Headers["X-Team"] != "data" {
		t.Fatalf("remote = %+v", r)
	}
	if got := strings.Join(cfg.Agents["a"].MCPServers, ","); got != "kb,remote" {
		t.Errorf("agent servers %s", got)
	}
	found := false
	for _, v := range cfg.SensitiveValues() {
		if strings.Contains(v, "s3cret-token") {
			found = true
		}
	}
	if !found {
		t.Error("the sensitive header is not scrubbed")
	}
}

func TestMCPServerErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"no transport", `mcp_server "kb" {}`, "needs command = [...]"},
		{"both transports", `mcp_server "kb" {
  command = ["x"]
  url     = "http://x"
}`, "sets both command"},
		{"empty command", `mcp_server "kb" { command = [] }`, "must name the server's program"},
		{"headers without url", `mcp_server "kb" {
  command = ["x"]
  headers = { A = "b" }
}`, "has no url"},
		{"sandbox with url", `mcp_server "kb" {
  url     = "http://x"
  sandbox = sandbox.box
}`, "Only a stdio server"},
		{"approval for a tool not allowed", `mcp_server "kb" {
  command        = ["x"]
  allowed_tools  = ["search"]
  needs_approval = { serch = true }
}`, `needs_approval names "serch"`},
		{"bad approval map", `mcp_server "kb" {
  command        = ["x"]
  needs_approval = { a = "maybe" }
}`, "map from tool name to true or false"},
		{"unknown server", `agent "a" {
  provider    = provider.scripted
  mcp_servers = [mcp_server.nope]
}`, `no mcp_server named "nope"`},
		{"clash", `mcp_server "one" {
  command       = ["x"]
  allowed_tools = ["search"]
}
mcp_server "two" {
  url           = "http://x"
  allowed_tools = ["search"]
}
agent "a" {
  provider    = provider.scripted
  mcp_servers = [mcp_server.one, mcp_server.two]
}`, `both mcp_server.one and mcp_server.two`},
		{"allowed tools that sanitize alike", `mcp_server "kb" {
  command       = ["x"]
  allowed_tools = ["a b", "a_b"]
}`, `allowed_tools lists "a b" and "a_b", which the model would both get as "a_b"`},
		{"unknown attribute", `mcp_server "kb" {
  command = ["x"]
  args    = ["y"]
}`, `"args" is not expected`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load(t, map[string]string{"main.hcl": mcpAgents + tc.src}, Options{})
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
				t.Fatalf("diagnostics %q, want one containing %q", diags.Error(), tc.want)
			}
			for _, d := range diags {
				if d.Subject == nil || d.Subject.Filename == "" {
					t.Errorf("diagnostic without a location: %s", d.Error())
				}
			}
		})
	}
}
