# Handoffs, offline: the pattern of handoff.hcl with a scripted model, so
# it runs with no key and no network. The analyst reads the numbers in a
# sandbox, then hands the conversation to the copywriter, who writes the
# email.
#
#   agentctl apply -auto-approve examples/handoff-offline.hcl
#   agentctl show -config=examples/handoff-offline.hcl run.q1_email

provider "scripted" {
  script "analyst" {
    reply {
      call "exec_command" {
        arguments = { cmd = "cat data/sales.csv" }
      }
    }
    reply {
      text = "EU 1.2M, US 2.0M in Q1. Handing off for the email."
      call "transfer_to_copywriter" {
        arguments = {}
      }
    }
  }
  script "copywriter" {
    reply {
      text = "Dear Acme Corp, Q1 revenue was 2.0M in the US and 1.2M in the EU."
    }
  }
}

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
  provider     = provider.scripted
  instructions = "Compute revenue by region from data/sales.csv, then hand off to the copywriter with your findings."
  sandbox      = sandbox.analysis
  capabilities = [capability.shell.default]
  handoffs     = [agent.copywriter]
}

agent "copywriter" {
  provider     = provider.scripted
  instructions = "Turn the analyst's findings into a short email. If a number is missing, hand back to the analyst."
  handoffs     = [agent.analyst]
}

run "q1_email" {
  agent = agent.analyst
  input = "Summarize Q1 performance by region for Acme Corp."
}

output "email" {
  value = run.q1_email.output
}
