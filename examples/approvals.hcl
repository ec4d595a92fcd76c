# Approvals: a guarded shell where reads run freely and anything else
# waits for a reviewer. Runs offline (scripted model, local sandbox).
#
#   agentctl apply -auto-approve examples/approvals.hcl
#       # run.tidy ends awaiting_approval; the summary names the call
#   agentctl show -config=examples/approvals.hcl run.tidy
#   agentctl approve -config=examples/approvals.hcl run.tidy call_janitor_1_0 -reason "ok"
#   agentctl apply -auto-approve examples/approvals.hcl
#       # the approved call runs and the run completes
#
# agentctl reject ... -reason TEXT instead tells the model
# "rejected by the reviewer: TEXT" and the run goes on without the call.
# docs/approvals.md has the details.

provider "scripted" {
  script "janitor" {
    # Turn 1: a read; the policy lets it run at once.
    reply {
      call "exec_command" {
        arguments = { cmd = "ls -a" }
      }
    }
    # Turn 2: a write; it waits for approval.
    reply {
      call "exec_command" {
        arguments = { cmd = "echo archived > DANGEROUS" }
      }
    }
    reply {
      text = "The workspace is archived."
    }
  }
}

provider "local" {}

manifest "files" {
  file "notes.txt" {
    content = "keep me\n"
  }
}

sandbox "work" {
  provider = provider.local
  manifest = manifest.files
}

locals {
  # Programs that only read. A program that can write or run others
  # (find -delete, sort -o, env, xargs, sh) does not belong here.
  reads = ["ls", "cat", "grep", "head", "wc"]
}

# exec_command needs approval unless it is a simple command (no shell
# syntax: no ;, &&, |, >, $(...), quotes or globs, and no login shell)
# whose program is a read. Testing the command's text alone would let
# "ls -a; echo archived > DANGEROUS" through: the shell, not the policy,
# reads the text (docs/security.md, "What approvals guarantee").
capability "shell" "guarded" {
  needs_approval = !(call.simple && contains(local.reads, call.words[0]))
}

agent "janitor" {
  provider     = provider.scripted
  instructions = "Tidy the workspace with the shell."
  sandbox      = sandbox.work
  capabilities = [capability.shell.guarded]
  max_turns    = 5
}

run "tidy" {
  agent = agent.janitor
  input = "Archive the workspace."
}

output "answer" {
  value = run.tidy.output
}
