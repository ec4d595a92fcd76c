# Agents as tools, fanned out: an orchestrator calls three reviewer agents
# as tools (several calls in one turn run concurrently) and returns a
# structured verdict. A for_each run reviews every plan in parallel.
#
#   OPENAI_API_KEY=... agentctl apply examples/agents-as-tools.hcl
#   agentctl graph -type=agents examples/agents-as-tools.hcl

variable "model" {
  type    = string
  default = "gpt-5.4-mini"
}

variable "plans" {
  type        = map(string)
  description = "Plan name => the plan's text"
  default = {
    pricing = "Raise the Pro tier from $20 to $25 in March."
    rollout = "Ship the new onboarding to 10% of users, then 100% after a week."
  }
}

locals {
  reviewer_instructions = "Review the plan you are given from your angle. Answer in three bullet points."
}

provider "openai" {}

agent "finance" {
  model        = var.model
  instructions = "${local.reviewer_instructions} Your angle: revenue and cost."
}

agent "legal" {
  model        = var.model
  instructions = "${local.reviewer_instructions} Your angle: legal and compliance risk."
}

agent "support" {
  model        = var.model
  instructions = "${local.reviewer_instructions} Your angle: customer support load."
}

agent "orchestrator" {
  model        = var.model
  instructions = "Ask every reviewer about the plan (call them in parallel), then decide."

  tool "review_finance" {
    agent       = agent.finance
    description = "Get the finance review of a plan."
  }
  tool "review_legal" {
    agent       = agent.legal
    description = "Get the legal review of a plan."
  }
  tool "review_support" {
    agent       = agent.support
    description = "Get the support review of a plan."
  }

  # The run's output is an object with these fields, passed back as JSON.
  output_schema = {
    type = "object"
    properties = {
      decision = { type = "string", enum = ["go", "no-go", "revise"] }
      reasons  = { type = "array", items = { type = "string" } }
    }
    required             = ["decision", "reasons"]
    additionalProperties = false
  }
}

# One run per plan; run.review["pricing"], run.review["rollout"].
run "review" {
  for_each = var.plans
  agent    = agent.orchestrator
  input    = "Plan ${each.key}: ${each.value}"
}

# A summary that waits for every review.
agent "editor" {
  model        = var.model
  instructions = "Write a one-paragraph summary of the decisions."
}

run "summary" {
  agent = agent.editor
  input = "Decisions: ${jsonencode({ for k, r in run.review : k => r.output })}"
}

output "decisions" {
  value = { for k, r in run.review : k => r.output }
}
