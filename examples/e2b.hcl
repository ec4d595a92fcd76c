# A coding agent in an E2B cloud sandbox, with a git repository in its
# workspace.
#
# Environment variables to set before plan/apply:
#
#   E2B_API_KEY      required: an API key from the E2B dashboard
#   OPENAI_API_KEY   required: the model provider's key
#   E2B_DOMAIN       optional: a self-hosted E2B (default e2b.app)
#   OPENAI_BASE_URL  optional: an OpenAI-compatible endpoint
#
#   export E2B_API_KEY=e2b_... OPENAI_API_KEY=sk-...
#   agentctl apply examples/e2b.hcl
#
# Credentials are read from the environment when the command runs and never
# reach the state, plans, journals or logs. `agentctl validate` needs none.

variable "model" {
  type    = string
  default = "gpt-5.4"
}

provider "openai" {}

# Both attributes are optional and override their environment variable:
# api_key (E2B_API_KEY) and domain (E2B_DOMAIN). Never write a key here:
# use env("...") if you must.
provider "e2b" {}

manifest "repo" {
  git_repo "sdk" {
    repo = "openai/openai-agents-python"
    ref  = "main"
  }
  dir "notes" {}
}

sandbox "dev" {
  provider = provider.e2b
  template = "base" # an E2B template's name or id: its image, CPUs and memory
  manifest = manifest.repo
  ports    = [8000] # served at https://8000-<sandbox id>.e2b.app

  env        = { PIP_DISABLE_PIP_VERSION_CHECK = "1" }
  metadata   = { team = "agents" }
  timeout    = "1h"   # E2B kills a sandbox agentctl has not used for this long
  on_timeout = "kill" # or "pause": keep it, paused, instead
  on_exit    = "stop" # pause it when the apply ends; the next apply resumes it
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
