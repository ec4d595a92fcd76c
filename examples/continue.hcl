# A follow-up run that continues another run's conversation.
#
# run.explore asks the analyst a question; run.report continues that
# conversation (continue = run.explore): the model sees everything
# run.explore said and did (its input, replies, tool calls and their
# outputs), then the new input. run.report runs after run.explore, in the
# same sandbox, and re-runs whenever run.explore's transcript changes.
#
# Runs offline: the "scripted" model provider replays the replies declared
# below; the script scoped to run "report" answers that run only.
#
#   agentctl apply -auto-approve examples/continue.hcl
#   agentctl show -config=examples/continue.hcl run.report
#   agentctl output -config=examples/continue.hcl report

provider "scripted" {
  # The analyst's replies in every run without a script of its own.
  script "analyst" {
    reply {
      call "exec_command" {
        arguments = { cmd = "cat data/sales.csv" }
      }
    }
    reply {
      text = "Q3 had the highest revenue (4100000)."
    }
  }
  # The analyst's replies in run "report": it remembers the answer above.
  script "analyst" {
    run = "report"
    reply {
      call "exec_command" {
        arguments = { cmd = "printf '# Sales\\n\\nBest quarter: Q3 (4100000).\\n' > output/summary.md && cat output/summary.md" }
      }
    }
    reply {
      text = "Wrote output/summary.md: Q3 was the best quarter, as found above."
    }
  }
}

provider "local" {}

manifest "sales" {
  file "data/sales.csv" {
    content = <<-CSV
      quarter,revenue
      Q1,3200000
      Q2,3500000
      Q3,4100000
      Q4,3500000
    CSV
  }
  dir "output" {}
}

sandbox "analysis" {
  provider = provider.local
  manifest = manifest.sales
}

capability "shell" "default" {
  timeout = "60s"
}

agent "analyst" {
  provider     = provider.scripted
  instructions = "You are a data analyst. Inspect the files in the workspace with the shell and answer precisely."
  sandbox      = sandbox.analysis
  capabilities = [capability.shell.default]
  max_turns    = 5
}

run "explore" {
  agent = agent.analyst
  input = "Which quarter had the highest revenue?"
}

run "report" {
  agent    = agent.analyst
  input    = "Write that answer to output/summary.md as a short Markdown report."
  continue = run.explore
}

output "report" {
  value = run.report.output
}
