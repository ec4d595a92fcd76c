# Memory: an agent that learns across runs, as the Agents SDK's Memory
# capability does. After each run, phase 1 extracts what is worth keeping
# from its rollout (rollouts/*.jsonl) into memory/raw_memories/; phase 2
# consolidates memory/MEMORY.md and memory/memory_summary.md, which the
# next run gets in its instructions. Runs offline: the scripted model also
# answers the memory calls (its replies after each run's last turn).
#
#   agentctl apply -auto-approve examples/memory.hcl
#   agentctl show -config=examples/memory.hcl run.second
#   agentctl show -config=examples/memory.hcl       # memory usage
#
# With a real model, drop the memory replies: the model writes them.

provider "scripted" {
  script "analyst" {
    run = "first"
    reply {
      call "exec_command" {
        arguments = { cmd = "head -3 data/sales.csv" }
      }
    }
    reply {
      text = "Revenue is in column 2 of data/sales.csv, in thousands."
    }
    # Phase 1 (extraction) of run.first's rollout.
    reply {
      text = jsonencode({
        rollout_slug    = "find-revenue-column"
        rollout_summary = "Looked at data/sales.csv and found the revenue column."
        raw_memory      = "- data/sales.csv: revenue is column 2, in thousands; the first line is a header."
      })
    }
    # Phase 2 (consolidation).
    reply {
      text = jsonencode({
        memory_md      = "# Data\n\n- data/sales.csv: revenue is column 2, in thousands; the first line is a header.\n"
        memory_summary = "data/sales.csv holds quarterly revenue in column 2 (thousands), after a header line."
      })
    }
  }
  script "analyst" {
    run = "second"
    # The summary is in its instructions; it checks MEMORY.md and answers.
    reply {
      call "exec_command" {
        arguments = { cmd = "grep -n -i revenue memory/MEMORY.md && awk -F, 'NR>1 {s+=$2} END {print s}' data/sales.csv" }
      }
    }
    reply {
      text = "Total revenue: 1000 thousand."
    }
    reply {
      text = jsonencode({
        rollout_slug    = "total-revenue"
        rollout_summary = "Summed column 2 of data/sales.csv: 1000."
        raw_memory      = "- Total revenue over the four quarters of data/sales.csv is 1000 (thousands)."
      })
    }
    reply {
      text = jsonencode({
        memory_md      = "# Data\n\n- data/sales.csv: revenue is column 2, in thousands; the first line is a header.\n- Total revenue over the four quarters: 1000.\n"
        memory_summary = "data/sales.csv holds quarterly revenue in column 2 (thousands); the total is 1000."
      })
    }
  }
}

provider "local" {}

manifest "data" {
  file "data/sales.csv" {
    content = "quarter,revenue\nQ1,100\nQ2,200\nQ3,300\nQ4,400\n"
  }
}

sandbox "work" {
  provider = provider.local
  manifest = manifest.data
}

capability "shell" "default" {}
capability "filesystem" "default" {}

capability "memory" "default" {
  read {
    live_update        = true
    max_summary_tokens = 2000
  }
  write {
    batch_size   = 1
    extra_prompt = "Note where each number comes from."
  }
}

agent "analyst" {
  provider     = provider.scripted
  instructions = "Answer questions about the data in the workspace."
  sandbox      = sandbox.work
  capabilities = [capability.shell.default, capability.filesystem.default, capability.memory.default]
}

run "first" {
  agent = agent.analyst
  input = "Which column of data/sales.csv holds revenue?"
}

run "second" {
  agent      = agent.analyst
  input      = "What is the total revenue?"
  depends_on = [run.first]
}
