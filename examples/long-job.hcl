# A resumable long job: an agent works through many turns, and every turn
# is checkpointed. Interrupt the apply (Ctrl-C, kill -9, reboot) and run
# apply again: the run continues from its last completed turn instead of
# starting over. Runs offline with the scripted model.
#
#   agentctl apply -auto-approve examples/long-job.hcl   # interrupt it
#   agentctl apply -auto-approve examples/long-job.hcl   # resumes

provider "scripted" {
  script "migrator" {
    reply {
      call "exec_command" {
        arguments = { cmd = "ls records" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "sleep 2; tr a-z A-Z < records/001.txt > out/001.txt" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "sleep 2; tr a-z A-Z < records/002.txt > out/002.txt" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "sleep 2; tr a-z A-Z < records/003.txt > out/003.txt" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "sleep 2; tr a-z A-Z < records/004.txt > out/004.txt" }
      }
    }
    reply {
      # Several tool calls in one turn run in parallel.
      call "exec_command" {
        arguments = { cmd = "sleep 2; tr a-z A-Z < records/005.txt > out/005.txt" }
      }
      call "exec_command" {
        arguments = { cmd = "sleep 2; tr a-z A-Z < records/006.txt > out/006.txt" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "ls out | wc -l" }
      }
    }
    reply {
      text = "Migrated 6 records into out/."
    }
  }
}

provider "local" {
  isolation = "none" # plain directory, no namespaces
}

manifest "records" {
  file "records/001.txt" { content = "alpha\n" }
  file "records/002.txt" { content = "bravo\n" }
  file "records/003.txt" { content = "charlie\n" }
  file "records/004.txt" { content = "delta\n" }
  file "records/005.txt" { content = "echo\n" }
  file "records/006.txt" { content = "foxtrot\n" }
  dir "out" {}
}

sandbox "work" {
  provider = provider.local
  manifest = manifest.records
  on_exit  = "keep" # leave the workspace for inspection
}

capability "shell" "default" {
  timeout = "30s"
}

# Keep the transcript short over many turns.
capability "compaction" "default" {}

agent "migrator" {
  provider     = provider.scripted
  instructions = "Convert every record in records/ to upper case into out/, one file per turn."
  sandbox      = sandbox.work
  capabilities = [capability.shell.default, capability.compaction.default]
  max_turns    = 20
}

run "migrate" {
  agent     = agent.migrator
  input     = "Migrate all records."
  max_turns = 20
}

output "result" {
  value = run.migrate.output
}
