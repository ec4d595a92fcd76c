# Handoffs: an analyst works out the numbers in a sandbox, then hands the
# conversation to a copywriter who writes the client email.
#
# Handoffs are addresses, not values, so agents may hand off to each other
# in a cycle (the copywriter can hand back when numbers are missing).
#
#   OPENAI_API_KEY=... agentctl apply examples/handoff.hcl

variable "model" {
  type        = string
  default     = "gpt-5.4-mini"
  description = "Model for every agent"
  validation {
    condition     = length(var.model) > 0
    error_message = "model must not be empty"
  }
}

variable "client" {
  type    = string
  default = "Acme Corp"
}

# Credentials come from OPENAI_API_KEY and are never stored.
provider "openai" {}
provider "local" {}

manifest "sales" {
  file "data/sales.csv" {
    content = "region,quarter,revenue\neu,Q1,1200000\nus,Q1,2000000\n"
  }
}

sandbox "analysis" {
  provider = provider.local
  manifest = manifest.sales
}

capability "shell" "default" {}

agent "analyst" {
  model        = var.model
  instructions = "Compute revenue by region from data/sales.csv, then hand off to the copywriter with your findings."
  sandbox      = sandbox.analysis
  capabilities = [capability.shell.default]
  handoffs     = [agent.copywriter]
  settings {
    reasoning_effort = "medium"
  }
}

agent "copywriter" {
  model        = var.model
  instructions = "Turn the analyst's findings into a short email for ${var.client}. If a number is missing, hand back to the analyst."
  handoffs     = [agent.analyst]
}

run "q1_email" {
  agent = agent.analyst
  input = "Summarize Q1 performance by region for ${var.client}."
}

output "email" {
  value = run.q1_email.output
}
