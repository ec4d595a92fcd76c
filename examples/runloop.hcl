# A coding agent in a Runloop devbox, with a git repository in its
# workspace.
#
# Environment variables to set before plan/apply:
#
#   RUNLOOP_API_KEY   required: an API key from the Runloop dashboard
#   OPENAI_API_KEY    required: the model provider's key
#   RUNLOOP_BASE_URL  optional: another Runloop API (default https://api.runloop.ai)
#
#   export RUNLOOP_API_KEY=ak_... OPENAI_API_KEY=sk-...
#   agentctl apply examples/runloop.hcl
#
# Credentials are read from the environment when the command runs and never
# reach the state, plans, journals or logs. `agentctl validate` needs none.

variable "model" {
  type    = string
  default = "gpt-5.4"
}

provider "openai" {}

# Both attributes are optional and override their environment variable:
# api_key (RUNLOOP_API_KEY) and base_url (RUNLOOP_BASE_URL).
provider "runloop" {}

manifest "repo" {
  git_repo "sdk" {
    repo = "openai/openai-agents-python"
    ref  = "main"
  }
  dir "notes" {}
}

sandbox "dev" {
  provider = provider.runloop
  # blueprint = "my-python-blueprint" # a blueprint's name (or blueprint_id); Runloop's default image without
  manifest = manifest.repo
  ports    = [8000] # served through the devbox's tunnel, https://8000-<key>.tunnel.runloop.ai

  resource_size   = "SMALL" # or a resources block for a custom size
  env             = { PIP_DISABLE_PIP_VERSION_CHECK = "1" }
  secrets         = { GITHUB_TOKEN = "MY_GITHUB_TOKEN" } # variable = Runloop secret name
  metadata        = { team = "agents" }
  timeout         = "1h"  # Runloop shuts down a devbox agentctl has not kept alive for this long
  idle_timeout    = "30m" # and, with on_idle, acts on one idle this long
  on_idle         = "suspend"
  commit_snapshot = true   # a Runloop disk snapshot with each workspace snapshot
  on_exit         = "stop" # suspend it when the apply ends; the next apply resumes it
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
