# A data analyst in a Docker container with a custom command tool, a
# chart served on a published port, and a sensitive token that is injected
# into each command but never stored anywhere.
#
#   AGENTCTL_VAR_db_token=... OPENAI_API_KEY=... agentctl apply examples/docker-analyst.hcl
#
# The image is pulled when missing; with no registry, build or load one and
# name it: agentctl apply -var image=my-python:3.12 examples/docker-analyst.hcl
# (it needs /bin/sh and python3). examples/docker-offline.hcl runs with no
# registry and no API key at all.

variable "model" {
  type    = string
  default = "gpt-5.4-mini"
}

variable "image" {
  type        = string
  default     = "python:3.12-slim"
  description = "Image of the sandbox: needs /bin/sh and python3"
}

variable "db_token" {
  type      = string
  default   = "not-a-real-token"
  sensitive = true # never written to state, plans, logs or traces
}

provider "openai" {}

# Uses DOCKER_HOST or the local socket.
provider "docker" {}

manifest "analysis" {
  root = "/workspace"
  file "data/sales.csv" {
    content = "quarter,revenue\nQ1,3200000\nQ2,3500000\n"
  }
  file "tools/query.py" {
    mode    = "0755"
    content = <<-PY
      import json, sys
      args = json.load(sys.stdin)
      print("quarter,revenue")  # a stand-in for a real database query
      print("Q1,3200000")
    PY
  }
  dir "output" {}
  env = { REGION = "eu" }
  env "DB_TOKEN" {
    value     = var.db_token
    ephemeral = true # injected into each command, never persisted
  }
}

sandbox "analysis" {
  provider = provider.docker
  image    = var.image
  manifest = manifest.analysis
  network  = "bridge" # published ports need a container network ("none" has none)
  ports    = [8080]   # on 127.0.0.1, a free host port: sandbox.analysis.urls["8080"]
  on_exit  = "stop"
  user     = "1000:1000"

  resources {
    cpus   = 1.5
    memory = 1024 # MB
    pids   = 256
  }
}

capability "shell" "default" {
  timeout           = "120s"
  max_output_tokens = 4000
}

capability "filesystem" "default" {} # apply_patch and view_image

capability "command" "query_db" {
  description = "Run a read-only SQL query and return CSV"
  parameters  = { sql = { type = "string", description = "the query" } }
  command     = ["python3", "tools/query.py"] # arguments arrive as JSON on stdin
  timeout     = "30s"
}

agent "analyst" {
  model        = var.model
  instructions = "Analyze the sales data. Write charts to output/ and explain them."
  sandbox      = sandbox.analysis
  capabilities = [capability.shell.default, capability.filesystem.default, capability.command.query_db]
  output_schema = {
    type       = "object"
    properties = { summary = { type = "string" } }
    required   = ["summary"]
  }
  max_turns = 20
}

run "report" {
  agent = agent.analyst
  input = "Summarize revenue by quarter; serve the chart on port 8080."
}

output "summary" {
  value = run.report.output
}

output "chart_url" {
  value = sandbox.analysis.urls["8080"]
}
