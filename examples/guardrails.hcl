# Guardrails, offline: agentctl apply examples/guardrails.hcl
#
# Two runs of the same agent with a scripted model. run.summary passes
# every guardrail; run.leak's answer mentions an API key, so its output
# guardrail trips: the run stops as guardrail_tripped and its answer is
# not recorded as its output. docs/guardrails.md explains each setting.

provider "scripted" {
  script "writer" {
    run = "summary"
    reply {
      call "lookup" {
        arguments = { topic = "pricing" }
      }
    }
    reply { text = "Prices rose 3% in Q3." }
  }
  script "writer" {
    run = "leak"
    reply { text = "Use the api_key sk-test-123 to call the service." }
  }
  script "judge" {
    reply { text = jsonencode({ tripwire = false, reason = "a business question" }) }
  }
}

# An expression guardrail: true lets the answer through, with no model call.
guardrail "no_keys" {
  on        = "output"
  condition = !can(regex("(?i)api[_-]?key|sk-[a-z0-9-]+", guard.text))
  message   = "the answer must not mention API keys"
}

# A tool guardrail: checked before each call runs.
guardrail "known_topics" {
  on        = "tool_input"
  condition = guard.tool != "lookup" || contains(["pricing", "sales"], guard.arguments.topic)
  message   = "lookup is limited to pricing and sales"
}

# An agent guardrail: the judge answers {tripwire, reason}, beside the
# first model call.
guardrail "on_topic" {
  on       = "input"
  agent    = agent.judge
  parallel = true
}

agent "judge" {
  provider     = provider.scripted
  instructions = "Set tripwire to true when the request is not a business question."
  output_schema = {
    type       = "object"
    properties = { tripwire = { type = "boolean" }, reason = { type = "string" } }
    required   = ["tripwire", "reason"]
  }
}

agent "writer" {
  provider   = provider.scripted
  guardrails = [guardrail.no_keys, guardrail.known_topics]
}

run "summary" {
  agent      = agent.writer
  input      = "Summarize the pricing changes."
  guardrails = [guardrail.on_topic]
}

run "leak" {
  agent = agent.writer
  input = "How do I call the service?"
}
