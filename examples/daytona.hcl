# A coding agent in a Daytona cloud sandbox, with a git repository in its
# workspace.
#
# Environment variables to set before plan/apply:
#
#   DAYTONA_API_KEY          required: an API key from the Daytona dashboard
#                            (or, instead, DAYTONA_JWT_TOKEN together with
#                            DAYTONA_ORGANIZATION_ID)
#   OPENAI_API_KEY           required: the model provider's key
#   DAYTONA_API_URL          optional: a self-hosted or regional Daytona API
#                            (default https://app.daytona.io/api)
#   DAYTONA_TARGET           optional: the region sandboxes run in, e.g. "eu"
#                            (default: the organization's default region)
#   OPENAI_BASE_URL          optional: an OpenAI-compatible endpoint
#
#   export DAYTONA_API_KEY=dtn_... OPENAI_API_KEY=sk-...
#   agentctl apply examples/daytona.hcl
#
# Credentials are read from the environment when the command runs and never
# reach the state, plans, journals or logs. `agentctl validate` needs none.

variable "model" {
  type    = string
  default = "gpt-5.4"
}

provider "openai" {}

# Every attribute is optional and overrides its environment variable:
# api_key (DAYTONA_API_KEY), jwt_token (DAYTONA_JWT_TOKEN), organization_id
# (DAYTONA_ORGANIZATION_ID), api_url (DAYTONA_API_URL), target
# (DAYTONA_TARGET). Never write a key here: use env("...") if you must.
provider "daytona" {}

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
