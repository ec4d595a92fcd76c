# A coding agent in a Daytona cloud sandbox, with a git repository in its
# workspace. Credentials come from DAYTONA_API_KEY / DAYTONA_API_URL (or
# the provider block) and never reach state.
#
#   DAYTONA_API_KEY=... OPENAI_API_KEY=... agentctl apply examples/daytona.hcl

variable "model" {
  type    = string
  default = "gpt-5.4"
}

provider "openai" {}

provider "daytona" {
  api_key = env("DAYTONA_API_KEY") # sensitive: allowed in provider settings
  target  = "eu"
}

manifest "repo" {
  git_repo "sdk" {
    repo = "openai/openai-agents-python"
    ref  = "main"
  }
  dir "notes" {}
}

sandbox "dev" {
  provider = provider.daytona
  image    = "python:3.12"
  manifest = manifest.repo
  ports    = [8000]

  labels             = { team = "agents" }
  auto_stop_interval = 30 # minutes idle before Daytona stops it
  network_block_all  = false
  create_timeout     = "5m"

  resources {
    cpus   = 2
    memory = 4096 # MB
    disk   = 10   # GB
  }
}

capability "shell" "default" {
  timeout = "300s"
}

capability "filesystem" "default" {}

agent "coder" {
  model        = var.model
  instructions = "You are a careful Python engineer. Run the tests before and after every change."
  sandbox      = sandbox.dev
  capabilities = [capability.shell.default, capability.filesystem.default]
  max_turns    = 40
}

run "docs_fix" {
  agent = agent.coder
  input = "In sdk/, find a typo in the README and fix it with apply_patch. Write what you changed to notes/changes.md."
}

output "changes" {
  value = run.docs_fix.output
}
