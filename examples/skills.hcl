# Skills: packaged procedures an agent follows, in the Agent Skills layout
# (a folder per skill with a SKILL.md whose front matter has name and
# description; here examples/skills/). Runs offline: scripted model,
# local sandbox.
#
#   agentctl apply -auto-approve examples/skills.hcl
#   agentctl show -config=examples/skills.hcl run.summary
#
# The eager capability copies every skill into the workspace (.agents/)
# and lists them in the agent's instructions; the lazy one lists them and
# gives the agent a load_skill tool that copies one in when asked. Editing
# a SKILL.md re-runs the runs whose agents use it.

provider "scripted" {
  script "analyst" {
    # Turn 1: follow the csv-summary skill: run its script.
    reply {
      call "exec_command" {
        arguments = { cmd = "sh .agents/csv-summary/scripts/summarize.sh data/sales.csv 2" }
      }
    }
    reply {
      text = "4 quarters, 1000 in total."
    }
  }
  script "writer" {
    # Turn 1: load the release-notes skill on demand.
    reply {
      call "load_skill" {
        arguments = { skill_name = "release-notes" }
      }
    }
    reply {
      text = "## Added\n- CSV summaries"
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

# Every skill in the workspace, indexed in the instructions.
capability "skills" "team" {
  source = "./skills"
}

# The same skills, loaded one at a time with load_skill.
capability "skills" "library" {
  source = "./skills"
  lazy   = true
}

agent "analyst" {
  provider     = provider.scripted
  instructions = "Answer questions about the data in the workspace."
  sandbox      = sandbox.work
  capabilities = [capability.shell.default, capability.skills.team]
}

agent "writer" {
  provider     = provider.scripted
  instructions = "Write release notes."
  sandbox      = sandbox.work
  capabilities = [capability.skills.library]
}

run "summary" {
  agent = agent.analyst
  input = "Summarize data/sales.csv."
}

run "notes" {
  agent = agent.writer
  input = "Release notes for: added CSV summaries."
}
