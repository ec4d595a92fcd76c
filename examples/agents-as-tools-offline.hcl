# Agents as tools, offline: the pattern of agents-as-tools.hcl with a
# scripted model, so it runs with no key and no network. The orchestrator
# calls two reviewer agents as tools in one turn (they run concurrently)
# and returns a structured verdict.
#
#   agentctl apply -auto-approve examples/agents-as-tools-offline.hcl
#   agentctl graph -type=agents examples/agents-as-tools-offline.hcl

provider "scripted" {
  script "orchestrator" {
    reply {
      call "review_finance" {
        arguments = { input = "Raise the Pro tier from $20 to $25 in March." }
      }
      call "review_support" {
        arguments = { input = "Raise the Pro tier from $20 to $25 in March." }
      }
    }
    reply {
      text = jsonencode({ decision = "go", reasons = ["margin improves", "support load is manageable"] })
    }
  }
  script "finance" {
    reply { text = "Margin improves by about 25% per seat." }
  }
  script "support" {
    reply { text = "Expect a short spike in billing tickets." }
  }
}

agent "finance" {
  provider     = provider.scripted
  instructions = "Review the plan from the angle of revenue and cost."
}

agent "support" {
  provider     = provider.scripted
  instructions = "Review the plan from the angle of customer support load."
}

agent "orchestrator" {
  provider     = provider.scripted
  instructions = "Ask every reviewer about the plan (call them in parallel), then decide."

  tool "review_finance" {
    agent       = agent.finance
    description = "Get the finance review of a plan."
  }
  tool "review_support" {
    agent       = agent.support
    description = "Get the support review of a plan."
  }

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

run "pricing" {
  agent = agent.orchestrator
  input = "Plan pricing: Raise the Pro tier from $20 to $25 in March."
}

output "verdict" {
  value = run.pricing.output
}
