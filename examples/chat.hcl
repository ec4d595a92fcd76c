# A conversation with an agent: agentctl chat.
#
# Each line typed is a turn; the assistant answers in its sandbox, which
# is created on the first turn and kept between turns and sessions. The
# conversation is kept in the state as chat.demo, so running the command
# again continues it (/history shows it, /reset starts it over).
#
# Runs offline: the "scripted" model provider replays the replies below,
# in order across the session's turns; the script scoped to chat "demo"
# answers in that session only.
#
#   printf 'hello\nnext\n' | agentctl chat -config examples/chat.hcl -session demo agent.assistant
#   agentctl show -config examples/chat.hcl chat.demo

provider "scripted" {
  # The assistant's replies in session "demo": turn 1 writes a note,
  # turn 2 reads it back.
  script "assistant" {
    chat = "demo"
    reply {
      call "exec_command" {
        arguments = { cmd = "echo 'remember: the meeting is at 10' > notes.txt" }
      }
    }
    reply {
      text = "Hello! I wrote a note to notes.txt."
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "cat notes.txt" }
      }
    }
    reply {
      text = "The note says: remember: the meeting is at 10."
    }
  }
  # Its reply in any other session.
  script "assistant" {
    reply {
      text = "Hello! This session has no script; try -session demo."
    }
  }
}

provider "local" {}

manifest "notes" {
  dir "notes" {}
}

sandbox "desk" {
  provider = provider.local
  manifest = manifest.notes
}

capability "shell" "default" {
  timeout = "60s"
}

agent "assistant" {
  provider     = provider.scripted
  instructions = "You are a helpful assistant with a shell in your workspace."
  sandbox      = sandbox.desk
  capabilities = [capability.shell.default]
}
