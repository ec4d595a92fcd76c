# Hooks and conditions, offline: a scripted model, so it runs with no key
# and no network. The tool_start hook is a host command run in this
# directory; it reads the call as JSON on stdin and blocks any command
# that deletes files: the model reads its stderr and tries something else.
# The run_end hook appends the run's end to hooks.log. The postcondition
# fails the run if the answer does not name the file count.
#
#   agentctl apply -auto-approve examples/hooks.hcl
#   agentctl show -config=examples/hooks.hcl run.tidy

provider "scripted" {
  script "janitor" {
    reply {
      call "exec_command" {
        arguments = { cmd = "rm -rf data" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "ls data | wc -l" }
      }
    }
    reply {
      text = "Deleting is not allowed, so I counted instead: 2 files in data."
    }
  }
}

provider "local" {}

manifest "files" {
  file "data/a.txt" {
    content = "a\n"
  }
  file "data/b.txt" {
    content = "b\n"
  }
}

sandbox "box" {
  provider = provider.local
  manifest = manifest.files
}

capability "shell" "default" {}

agent "janitor" {
  provider     = provider.scripted
  instructions = "Tidy the data directory."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
  hook "tool_start" {
    command = ["sh", "-c", "if grep -q 'rm -'; then echo 'hook: deleting files is not allowed; count them instead' >&2; exit 1; fi"]
    timeout = "5s"
  }
}

run "tidy" {
  agent = agent.janitor
  input = "Tidy the data directory."
  hook "run_end" {
    command = ["sh", "-c", "cat >> hooks.log; echo >> hooks.log"]
  }
  lifecycle {
    postcondition {
      condition     = can(regex("2 files", self.output))
      error_message = "the answer does not say how many files there are"
    }
  }
}
