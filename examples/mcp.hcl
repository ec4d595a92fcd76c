# MCP servers: a librarian agent keeps a knowledge graph through the tools
# of a Model Context Protocol server, the MCP go-sdk's own "memory"
# example server, which `go run` builds from the module cache (run it
# from a clone of this repository, with Go installed). Runs offline: the
# scripted model calls the server's tools; the server is real.
#
#   agentctl plan examples/mcp.hcl      # lists the server's tools
#   agentctl apply -auto-approve examples/mcp.hcl
#   agentctl show -config=examples/mcp.hcl run.record
#
# A server binary of your own: -var 'kb_server=["/path/to/server"]'.
# The server's stderr is kept in .agentctl/logs/.

variable "kb_server" {
  type        = list(string)
  description = "The command that starts the knowledge-graph server (stdio)"
  default     = ["go", "run", "github.com/modelcontextprotocol/go-sdk/examples/server/memory"]
}

provider "scripted" {
  script "librarian" {
    # Turn 1: record a fact with the server's create_entities tool.
    reply {
      call "create_entities" {
        arguments = {
          entities = [{ name = "Ada Lovelace", entityType = "person", observations = ["wrote the first published program"] }]
        }
      }
    }
    # Turn 2: read the graph back.
    reply {
      call "search_nodes" {
        arguments = { query = "Ada" }
      }
    }
    reply {
      text = "Recorded: Ada Lovelace wrote the first published program."
    }
  }
}

# A stdio server started on this machine when a run needs it and stopped
# when the run ends. Add sandbox = sandbox.NAME to run it inside a sandbox,
# or use url = "https://..." (and headers) for a streamable HTTP server.
mcp_server "kb" {
  command = var.kb_server
  # Only these tools reach the agent, under their own names.
  allowed_tools = ["create_entities", "search_nodes", "read_graph", "delete_entities"]
  # Deleting waits for a reviewer (agentctl approve); the rest runs freely.
  needs_approval = { delete_entities = true }
  timeout        = "2m" # go run compiles the server on its first start
}

agent "librarian" {
  provider     = provider.scripted
  instructions = "Keep the team's knowledge graph up to date."
  mcp_servers  = [mcp_server.kb]
}

run "record" {
  agent = agent.librarian
  input = "Record that Ada Lovelace wrote the first published program."
}

output "answer" {
  value = run.record.output
}
