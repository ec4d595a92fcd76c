# Quickstart: a data analyst agent with a shell in a local sandbox.
#
# Runs offline: the "scripted" model provider replays the replies declared
# below instead of calling a model API, and the "local" sandbox provider
# runs commands in a workspace directory on this machine.
#
#   agentctl validate examples/quickstart.hcl
#   agentctl apply -auto-approve examples/quickstart.hcl
#   agentctl output -config=examples/quickstart.hcl answer

agentctl {
  required_version = ">= 0.1.0"
}

# A deterministic model for demos, tests and CI. Each script lists the
# replies one agent's model gives, consumed in order within a run.
provider "scripted" {
  script "analyst" {
    # Turn 1: look at the data with the shell tool.
    reply {
      call "exec_command" {
        arguments = { cmd = "cat data/sales.csv" }
      }
    }
    # Turn 2: compute the total.
    reply {
      text = "Let me add the quarters up."
      call "exec_command" {
        arguments = { cmd = "awk -F, 'NR>1 {s+=$2} END {print s}' data/sales.csv" }
      }
    }
    # Turn 3: the final answer ends the run.
    reply {
      text = "Q3 had the highest revenue (4100000); the year totals 14300000."
    }
  }
}

# The local sandbox provider: a workspace directory, isolated with Linux
# namespaces when available (isolation = "none" turns that off).
provider "local" {}

# What the workspace starts with.
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

# exec_command: run shell commands in the sandbox.
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

run "answer" {
  agent = agent.analyst
  input = "Which quarter had the highest revenue, and what is the yearly total?"
}

output "answer" {
  value = run.answer.output
}
