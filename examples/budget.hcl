# Budgets: limits on what a run, or one agent within it, may spend (model
# tokens, tool calls, running time). A run that spends one stops as
# failed, with the figure, and its journal is kept: raise the budget and
# the next apply resumes it from its checkpoint.
#
# Runs offline (scripted model, local sandbox). The run's budget allows
# two tool calls and the agent makes three, so the first apply stops:
#
#   agentctl apply -auto-approve examples/budget.hcl
#     run.survey: budget exceeded: 2 tool calls used of max_tool_calls = 2,
#     and the model asked for 1 more; raise max_tool_calls in the run's
#     budget block and apply again to resume the run from its checkpoint
#   agentctl plan -var max_tool_calls=5 examples/budget.hcl
#     # run.survey will be resumed
#     # (the run's budget changed: (max_tokens = 20,000, max_tool_calls = 2, ...) → (..., max_tool_calls = 5, ...))
#   agentctl apply -auto-approve -var max_tool_calls=5 examples/budget.hcl
#   agentctl show -config=examples/budget.hcl run.survey

variable "max_tool_calls" {
  type        = number
  default     = 2
  description = "The tool calls run.survey may make"
}

provider "scripted" {
  script "surveyor" {
    reply {
      call "exec_command" {
        arguments = { cmd = "ls" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "wc -l notes.txt" }
      }
      call "exec_command" {
        arguments = { cmd = "head -n 1 notes.txt" }
      }
    }
    reply {
      text = "notes.txt has 3 lines; the first says budgets stop runaway agents."
    }
  }
}

provider "local" { isolation = "none" }

manifest "notes" {
  file "notes.txt" {
    content = <<-EOT
      Budgets stop runaway agents.
      Raising a budget resumes the run.
      Budgets are not part of a run's digest.
    EOT
  }
}

sandbox "desk" {
  provider = provider.local
  manifest = manifest.notes
}

capability "shell" "default" {}

agent "surveyor" {
  provider     = provider.scripted
  instructions = "Survey the notes in the workspace and summarize them."
  sandbox      = sandbox.desk
  capabilities = [capability.shell.default]

  # The agent's budget covers its own turns and tool calls in any run.
  budget {
    max_tool_calls = 20
  }
}

run "survey" {
  agent = agent.surveyor
  input = "What do the notes say?"

  # The run's budget covers everything the run does, every agent in it.
  budget {
    max_tokens     = 20000
    max_tool_calls = var.max_tool_calls
    max_duration   = "5m"
  }
}

output "summary" {
  value = run.survey.output
}
